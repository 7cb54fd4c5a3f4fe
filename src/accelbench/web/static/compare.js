/* Compare page: the capacity chart (a plotly figure built by the report layer) when capacity searches are compared. */
"use strict";
(function () {
  const block = document.getElementById("capacity-chart-data");
  const el = document.getElementById("chart-capacity");
  if (!block || !el || !window.Plotly) return;
  const fig = JSON.parse(block.textContent);
  Plotly.newPlot(el, fig.data, fig.layout, { displaylogo: false, responsive: true });
})();
