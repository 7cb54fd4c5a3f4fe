/* Result page: plotly charts from the page's data blocks; refresh while the run is in flight. */
"use strict";
(function () {
  const charts = JSON.parse(document.getElementById("chart-data").textContent);
  const telemetry = JSON.parse(document.getElementById("telemetry-data").textContent);
  const bandsBlock = document.getElementById("cell-bands");
  const bands = bandsBlock ? JSON.parse(bandsBlock.textContent) : { shapes: [], annotations: [] };  // report/html.py cell_band_layout
  const deviceBlock = document.getElementById("device-chart-data");
  const deviceChart = deviceBlock ? JSON.parse(deviceBlock.textContent) : null;
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
        shapes: bands.shapes, annotations: bands.annotations,
        margin: { t: 40 }, legend: { orientation: "h" } }, config);
    }
    const dev = document.getElementById("chart-devices");
    if (dev && deviceChart) Plotly.newPlot(dev, deviceChart.data, deviceChart.layout, config);
  }
  accelbench.bindRunActions(document.getElementById("action-error"));
  // While the run is in flight: the page's own progress block, re-read from the server every 3 s (the words
  // are the server's: web/run_progress.py), the engine's log lines kept in the collapsed "engine log" as they
  // come; a new status or a new cell reloads the page.
  const summary = document.getElementById("run-summary");
  if (summary && summary.dataset.inflight === "1") {
    const logLines = document.getElementById("engine-log-lines");
    const seen = logLines && logLines.textContent ? [logLines.textContent] : [];
    const poll = async function () {
      try {
        const res = await fetch(location.pathname, { credentials: "same-origin", headers: { "Accept": "text/html" } });
        if (res.ok) {
          const doc = new DOMParser().parseFromString(await res.text(), "text/html");
          const fresh = doc.getElementById("run-summary");
          if (!fresh || fresh.dataset.status !== summary.dataset.status || fresh.dataset.cells !== summary.dataset.cells) {
            location.reload(); return;
          }
          const live = document.getElementById("run-live"), freshLive = doc.getElementById("run-live");
          if (live && freshLive) live.replaceChildren(...Array.from(freshLive.childNodes).map(function (n) { return document.importNode(n, true); }));
          const line = doc.getElementById("run-log-line");
          if (logLines && line && line.textContent && line.textContent !== seen[seen.length - 1]) {
            seen.push(line.textContent);
            if (seen.length > 200) seen.shift();
            logLines.textContent = seen.join("\n");
            document.getElementById("engine-log").hidden = false;
          }
        }
      } catch (e) { /* transient: try again */ }
      setTimeout(poll, 3000);
    };
    setTimeout(poll, 3000);
  }
})();
