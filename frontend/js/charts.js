// Chart wiring: every <script type="application/json" id="ID-figure"> (Django's json_script)
// holds a Plotly figure built by gpupool/dashboard/charts.py; it is drawn into #ID with the
// plotly.js served from the plotly wheel. Live parts that htmx swaps in are drawn again.
(function () {
  "use strict";
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };

  function draw(root) {
    if (typeof Plotly === "undefined") { return; }
    root.querySelectorAll('script[type="application/json"][id$="-figure"]').forEach(function (source) {
      var target = document.getElementById(source.id.replace(/-figure$/, ""));
      if (!target) { return; }
      var figure = JSON.parse(source.textContent);
      Plotly.react(target, figure.data, figure.layout, config).then(function () {
        target.dispatchEvent(new CustomEvent("gpupool:chart-drawn", { bubbles: true }));
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:load", function (event) { draw(event.target); });
})();
