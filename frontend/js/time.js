// Times in the viewer's zone. The server writes <time datetime="ISO" data-local="datetime|date">
// with the UTC (or last known zone's) text; this rewrites the text in the browser's zone and
// remembers the zone in the gpupool_tz cookie, so the next pages come in that zone already.
(function () {
  "use strict";
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  if (document.cookie.indexOf("gpupool_tz=" + encodeURIComponent(zone)) === -1) {
    document.cookie = "gpupool_tz=" + encodeURIComponent(zone) + ";path=/;max-age=31536000;samesite=lax";
  }
  var dateTime = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
    timeZoneName: "short"
  });
  var dateOnly = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric" });

  function localise(root) {
    root.querySelectorAll("time[data-local]").forEach(function (element) {
      var moment = new Date(element.getAttribute("datetime"));
      if (isNaN(moment.getTime())) { return; }
      var style = element.getAttribute("data-local");
      element.textContent = (style === "date" ? dateOnly : dateTime).format(moment);
      element.title = moment.toISOString();
    });
    root.querySelectorAll("[data-zone]").forEach(function (element) { element.textContent = zone; });
  }

  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:load", function (event) { localise(event.target); });
})();
