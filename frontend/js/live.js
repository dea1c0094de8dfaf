// Live refresh: parts marked hx-trigger="every Ns" are polled by htmx while the tab is
// visible. This keeps their "updated" stamp honest and tells screen readers (through the
// part's aria-live region) only when a refresh failed, not on every poll.
(function () {
  "use strict";
  // The stamp sits in the page's head, outside the part that is swapped (#live): it is found
  // in the document, and set when that part was refreshed.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (!event.target || event.target.id !== "live") {
      return;
    }
    var stamp = document.querySelector("[data-updated]");
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
