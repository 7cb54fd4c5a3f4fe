/* Result page: plotly charts from the page's data blocks; refresh while the run is in flight. */
"use strict";
(function () {
  const charts = JSON.parse(document.getElementById("chart-data").textContent);
  const telemetry = JSON.parse(document.getElementById("telemetry-data").textContent);
  const config = { displaylogo: false, responsive: true };
  function line(id, spec, xTitle) {
    const el = document.getElementById(id);
    if (!el || !spec.series.length) return;
    const traces = spec.series.map(function (s) { return { x: s.x, y: s.y, name: s.name, mode: "lines+markers", type: "scatter" }; });
    Plotly.newPlot(el, traces, { title: { text: spec.title }, xaxis: { title: { text: xTitle }, type: "log", tickvals: traces[0].x },
      yaxis: { title: { text: spec.y }, rangemode: "tozero" }, margin: { t: 40, r: 10 }, legend: { orientation: "h" } }, config);
  }
  if (window.Plotly) {
    line("chart-tpot", charts.tpot, "concurrency");
    line("chart-ttft", charts.ttft, "concurrency");
    line("chart-throughput", charts.throughput, "concurrency");
    const tel = document.getElementById("chart-telemetry");
    if (tel && telemetry.length) {
      const traces = telemetry.map(function (s) {
        return { x: s.x, y: s.y, name: s.name, mode: "lines", type: "scatter", yaxis: s.kv ? "y2" : "y" };
      });
      Plotly.newPlot(tel, traces, { title: { text: "Server telemetry over time" }, xaxis: { title: { text: "seconds" } },
        yaxis: { title: { text: "requests" }, rangemode: "tozero" },
        yaxis2: { title: { text: "KV-cache usage (%)" }, overlaying: "y", side: "right", rangemode: "tozero" },
        margin: { t: 40 }, legend: { orientation: "h" } }, config);
    }
  }
  accelbench.bindRunActions(document.getElementById("action-error"));
  const summary = document.getElementById("run-summary");
  if (summary && summary.dataset.inflight === "1") {
    const id = summary.dataset.run;
    const poll = async function () {
      try {
        const res = await fetch(`/api/v1/runs/${encodeURIComponent(id)}?max_points=10`, { credentials: "same-origin" });
        if (res.ok) {
          const data = await res.json();
          if (data.run.status !== summary.dataset.status || data.run.cells !== Number(summary.dataset.cells)) {
            location.reload(); return;
          }
          const pr = data.run.progress || {};
          const parts = [];
          if (pr.phase) parts.push(pr.phase);
          if (pr.cells_total) parts.push(`${pr.cells_done || 0}/${pr.cells_total} cells`);
          const p = document.getElementById("run-progress"); if (p) p.textContent = parts.join(" · ");
        }
      } catch (e) { /* transient: try again */ }
      setTimeout(poll, 3000);
    };
    setTimeout(poll, 3000);
  }
})();
