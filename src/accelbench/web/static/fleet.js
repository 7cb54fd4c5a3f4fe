/* Fleet page: the servers each candidate needs over the traffic's span, one step line per candidate, drawn
   from the page's data block (plotly, served by this server). */
"use strict";
(function () {
  const block = document.getElementById("fleet-data");
  const el = document.getElementById("fleet-chart");
  if (!block || !el || !window.Plotly) return;
  const c = JSON.parse(block.textContent).chart;
  if (!c || !c.series.length) return;
  const traces = c.series.map(function (s) {
    return {
      type: "scatter", mode: "lines", name: s.name, x: s.x, y: s.y, line: { shape: "hv" },
      hovertemplate: "%{x:.1f} h: %{y} servers<extra>" + s.name + "</extra>",
    };
  });
  const layout = {
    title: { text: c.title },
    xaxis: { title: { text: "hours from the start" } },
    yaxis: { title: { text: "servers" }, rangemode: "tozero", dtick: 1 },
    legend: { orientation: "h", y: -0.2 },
    margin: { t: 50, r: 20 },
  };
  window.Plotly.newPlot(el, traces, layout, { displaylogo: false, responsive: true });
})();
