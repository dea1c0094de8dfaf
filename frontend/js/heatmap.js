// The GPU heatmap's interactions: pointing at or clicking a GPU writes it out in words in the
// panel beside it (read by screen readers: aria-live), and the Highlight menu greys every
// colour but one (a tenant, free, broken...). The figure keeps its categories and colours in
// layout.meta (gpupool/dashboard/charts.py gpu_heatmap_figure), with the colour to grey
// with; the choice outlives the part's live refresh (sessionStorage).
(function () {
  "use strict";
  var KEY = "gpupool-heatmap-highlight";

  function wire(chart) {
    if (chart.getAttribute("data-wired")) { return; }
    chart.setAttribute("data-wired", "1");
    var detail = document.getElementById("gpu-detail");
    function show(event) {
      var point = event.points && event.points[0];
      if (point && detail && point.text) { detail.textContent = point.text; }
    }
    chart.on("plotly_click", show);
    chart.on("plotly_hover", show);
  }

  function highlight(select) {
    var chart = document.getElementById(select.getAttribute("data-heatmap-highlight"));
    if (!chart || !chart.layout || !chart.layout.meta) { return; }
    var names = chart.layout.meta.categories;
    var colours = chart.layout.meta.colours;
    var steps = Math.max(names.length, 1);
    var scale = [];
    names.forEach(function (name, position) {
      var colour = !select.value || select.value === name ? colours[position] : chart.layout.meta.dim;
      scale.push([position / steps, colour], [(position + 1) / steps, colour]);
    });
    Plotly.restyle(chart, { colorscale: [scale] });
  }

  document.addEventListener("gpupool:chart-drawn", function (event) {
    if (event.target.hasAttribute("data-heatmap")) {
      wire(event.target);
      var select = document.querySelector('[data-heatmap-highlight="' + event.target.id + '"]');
      var kept = window.sessionStorage.getItem(KEY);
      if (select && kept && select.querySelector('option[value="' + CSS.escape(kept) + '"]')) {
        select.value = kept;
        highlight(select);
      }
    }
  });
  document.addEventListener("change", function (event) {
    if (event.target.hasAttribute && event.target.hasAttribute("data-heatmap-highlight")) {
      window.sessionStorage.setItem(KEY, event.target.value);
      highlight(event.target);
    }
  });
})();
