// Times in the viewer's zone. The server writes <time datetime="ISO" data-local="datetime|date">
// with the UTC (or last known zone's) text; this rewrites the text in the browser's zone and
// remembers the zone in the gpupool_tz cookie, so the next pages come in that zone already.
// Charts cannot be rewritten here (plotly.js draws the wall time the server gave): when the
// page was rendered in another zone (a first visit, or a new zone), the live part that holds
// them is fetched again at once, now in the viewer's zone.
(function () {
  "use strict";
  // Old names some browsers still report (ICU keeps them), by their current IANA names, so
  // the footer and the cookie name the zone as the tz database does today.
  var CURRENT_NAMES = {
    "Asia/Calcutta": "Asia/Kolkata", "Asia/Katmandu": "Asia/Kathmandu",
    "Asia/Saigon": "Asia/Ho_Chi_Minh", "Asia/Rangoon": "Asia/Yangon",
    "Europe/Kiev": "Europe/Kyiv", "Atlantic/Faeroe": "Atlantic/Faroe",
    "America/Godthab": "America/Nuuk", "Pacific/Enderbury": "Pacific/Kanton",
    "America/Buenos_Aires": "America/Argentina/Buenos_Aires",
    "America/Indianapolis": "America/Indiana/Indianapolis"
  };
  var reported = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  var zone = CURRENT_NAMES[reported] || reported;
  // Without the cookie naming this zone, the server rendered the page in another one.
  var renderedElsewhere = document.cookie.indexOf("gpupool_tz=" + encodeURIComponent(zone)) === -1;
  if (renderedElsewhere) {
    document.cookie = "gpupool_tz=" + encodeURIComponent(zone) + ";path=/;max-age=31536000;samesite=lax";
  }
  // The server's format (templatetags.dashboard.local_time): 2026-12-05 15:03, 2026-12-05,
  // here in the browser's zone.
  function two(number) { return (number < 10 ? "0" : "") + number; }
  function day(moment) {
    return moment.getFullYear() + "-" + two(moment.getMonth() + 1) + "-" + two(moment.getDate());
  }
  function dayAndTime(moment) {
    return day(moment) + " " + two(moment.getHours()) + ":" + two(moment.getMinutes());
  }
  // The zone by its offset, as the server names it (workloads.queries.zone_name): UTC, UTC+1,
  // UTC+5:30, UTC-3 -- not the browser's own abbreviation (GMT+1 here, CET in a summary).
  function zoneName(moment) {
    var minutes = -moment.getTimezoneOffset();
    if (minutes === 0) { return "UTC"; }
    var rest = Math.abs(minutes) % 60;
    return "UTC" + (minutes > 0 ? "+" : "-") + Math.floor(Math.abs(minutes) / 60) +
      (rest ? ":" + (rest < 10 ? "0" : "") + rest : "");
  }

  function localise(root) {
    root.querySelectorAll("time[data-local]").forEach(function (element) {
      var moment = new Date(element.getAttribute("datetime"));
      if (isNaN(moment.getTime())) { return; }
      var style = element.getAttribute("data-local");
      element.textContent = style === "date" ? day(moment)
        : dayAndTime(moment) + " " + zoneName(moment);
      element.title = moment.toISOString();
    });
    root.querySelectorAll("[data-zone]").forEach(function (element) { element.textContent = zone; });
  }

  function redrawLive() {
    var live = document.getElementById("live");
    if (!live || typeof htmx === "undefined" || !live.getAttribute("hx-get")) { return; }
    if (!live.querySelector('script[type="application/json"][id$="-figure"]')) { return; }
    htmx.ajax("GET", live.getAttribute("hx-get"), { target: live, swap: "innerHTML" });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localise(document);
    if (renderedElsewhere) { redrawLive(); }
  });
  document.addEventListener("htmx:load", function (event) { localise(event.target); });
})();
