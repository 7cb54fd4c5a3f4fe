/* Estimate page: sortable columns (the planner's rank is the "#" column) and the cost vs latency chart drawn
   from the page's data block (plotly, served by this server). */
"use strict";
(function () {
  window.accelbenchSortable(document.getElementById("estimate"));
  const block = document.getElementById("estimate-data");
  const el = document.getElementById("estimate-chart");
  if (!block || !el || !window.Plotly) return;
  const c = JSON.parse(block.textContent).chart;
  if (!c) return;
  const style = {
    met: { color: "#2a9d8f", symbol: "circle" },
    missed: { color: "#d1495b", symbol: "x" },
    none: { color: "#3366cc", symbol: "circle" },
  };
  const traces = c.traces.map(function (t) {
    return {
      type: "scatter", mode: "markers", name: t.name, x: t.x, y: t.y, text: t.text,
      marker: { color: style[t.state].color, symbol: style[t.state].symbol, size: 9, opacity: 0.85 },
      hovertemplate: "%{text}<br>" + c.x_title + ": %{x:.2f}<br>$%{y:.3f} per 1M output tokens<extra>" + t.name + "</extra>",
    };
  });
  const layout = {
    title: { text: c.title },
    xaxis: { title: { text: c.x_title }, type: c.x_log ? "log" : "linear" },
    yaxis: { title: { text: c.y_title }, type: c.y_log ? "log" : "linear" },
    legend: { orientation: "h", y: -0.2 },
    margin: { t: 50, r: 20 },
  };
  if (c.target !== null && c.target !== undefined) {
    // the target as a trace in data units, so it sits right on a log axis too
    const ys = [].concat.apply([], c.traces.map(function (t) { return t.y; }));
    traces.push({ type: "scatter", mode: "lines", name: c.target_label, x: [c.target, c.target],
                  y: [Math.min.apply(null, ys), Math.max.apply(null, ys)], hoverinfo: "skip",
                  line: { color: "#555", dash: "dash", width: 1 } });
  }
  Plotly.newPlot(el, traces, layout, { displaylogo: false, responsive: true });
})();
