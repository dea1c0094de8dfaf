// Live refresh: parts marked hx-trigger="every Ns" are polled by htmx while the tab is
// visible. This keeps their "updated" stamp honest and tells screen readers (through the
// part's aria-live region) only when a refresh failed, not on every poll.
(function () {
  "use strict";
  document.addEventListener("htmx:afterSwap", function (event) {
    var stamp = event.target.querySelector ? event.target.querySelector("[data-updated]") : null;
    if (stamp) {
      stamp.textContent = " · updated " + new Date().toLocaleTimeString();
    }
  });
  document.addEventListener("htmx:responseError", function (event) {
    var status = document.getElementById("live-status");
    if (status) {
      status.textContent = "This part could not be refreshed (" + event.detail.xhr.status +
        "); it shows what was true before.";
    }
  });
  document.addEventListener("htmx:sendError", function () {
    var status = document.getElementById("live-status");
    if (status) {
      status.textContent = "The server cannot be reached; this page shows what was true before.";
    }
  });
})();
