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
  // Capacity: latency at the judged percentile vs output throughput, one point per probe (green met the SLO,
  // red missed it), the SLO target as a dashed horizontal line, the chosen capacity ringed, the knee a diamond.
  const capacityBlock = document.getElementById("capacity-data");
  const capacity = capacityBlock ? JSON.parse(capacityBlock.textContent) : [];
  function colour(met) { return met === true ? "#1b7f3b" : met === false ? "#b3261e" : "#2457c5"; }
  function capacityChart(c) {
    const el = document.getElementById(`chart-capacity-${c.metric}`);
    if (!el || !c.points.length) return;
    const xs = c.points.map(function (p) { return p.x; });
    const label = function (p) { return `${p.label}${p.repeat > 1 ? " (again)" : ""}`; };
    const traces = [{
      x: xs, y: c.points.map(function (p) { return p.y; }), name: "probes", mode: "lines+markers", type: "scatter",
      text: c.points.map(label), hovertemplate: "%{text}<br>%{x:.1f} tok/s, %{y:.1f} ms<extra></extra>",
      marker: { size: 9, color: c.points.map(function (p) { return colour(p.met); }) }, line: { color: "#8a94a8" },
    }];
    if (c.target != null) {
      const lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs), pad = (hi - lo) * 0.05 || 1;
      traces.push({ x: [Math.max(0, lo - pad), hi + pad], y: [c.target, c.target], name: `SLO target ${c.target} ms`,
        mode: "lines", type: "scatter", hoverinfo: "name", line: { color: "#b3261e", dash: "dash" } });
    }
    if (c.chosen) {
      traces.push({ x: [c.chosen.x], y: [c.chosen.y], name: `capacity: ${c.chosen.label}`, mode: "markers",
        type: "scatter", hoverinfo: "name", marker: { size: 20, symbol: "circle-open", color: "#1b7f3b", line: { width: 3 } } });
    }
    if (c.knee) {
      traces.push({ x: [c.knee.x], y: [c.knee.y], name: `knee: ${c.knee.label}`, mode: "markers",
        type: "scatter", hoverinfo: "name", marker: { size: 15, symbol: "diamond", color: "#a86500" } });
    }
    Plotly.newPlot(el, traces, { title: { text: c.title }, xaxis: { title: { text: "output tokens/s" }, rangemode: "tozero" },
      yaxis: { title: { text: c.y }, rangemode: "tozero" }, margin: { t: 40, r: 10, b: 90 },
      legend: { orientation: "h", y: -0.3 } }, config);
  }
  if (window.Plotly) {
    capacity.forEach(capacityChart);
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
