/* Dashboard: the recent runs' output throughput against concurrency (one line per run) and the output tok/s of
   the recent capacity searches that met their SLO (one bar each), drawn with plotly (served by this server)
   from the page's data block (web/dashboard_view.py). A click on a point or a bar opens that run's page. */
"use strict";
(function () {
  const block = document.getElementById("dashboard-data");
  if (!block || !window.Plotly) return;
  const data = JSON.parse(block.textContent);
  const config = { displaylogo: false, responsive: true };
  // plotly reads trace names, categories and hover text as its own small HTML (links included): a run's
  // model or label is text, so its markup characters are written as entities, which plotly shows as typed
  const esc = (t) => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const fmt = (v, digits) => Number(v).toLocaleString("en-US", { maximumFractionDigits: digits });
  // every point and bar carries its run's page in customdata, so one handler serves both charts
  const openRun = (ev) => {
    const p = ev.points && ev.points[0];
    if (p && p.customdata) window.location.assign(p.customdata);
  };

  const lineEl = document.getElementById("throughput-chart");
  if (lineEl && data.throughput.length) {
    const traces = data.throughput.map((l) => ({
      type: "scatter", mode: "lines+markers", name: esc(l.name), x: l.x, y: l.y,
      customdata: l.x.map(() => l.href),
      hovertemplate: "concurrency %{x}<br>%{y:,.1f} output tok/s<br>input " + l.input_len +
        " tokens<extra>" + esc(l.name) + "</extra>",
    }));
    // sweeps double their concurrency (1, 2, 4 ... 256): a wide span is read on a log axis, else the low
    // levels, where most of the differences are, crowd into the corner
    const xs = [].concat.apply([], data.throughput.map((l) => l.x)).filter((x) => x > 0);
    const wide = xs.length > 0 && Math.max.apply(null, xs) / Math.min.apply(null, xs) >= 16;
    const layout = {
      xaxis: wide ? { title: { text: "concurrency (requests in flight, log scale)" }, type: "log" }
                  : { title: { text: "concurrency (requests in flight)" }, rangemode: "tozero" },
      yaxis: { title: { text: "output tokens/s" }, rangemode: "tozero" },
      hovermode: "closest",
      showlegend: true,  // one line is named too (plotly hides a lone trace's legend)
      legend: { orientation: "h", y: -0.25 },
      margin: { t: 20, r: 20 },
    };
    Plotly.newPlot(lineEl, traces, layout, config).then(() => lineEl.on("plotly_click", openRun));
  }

  const barEl = document.getElementById("capacity-chart");
  if (barEl && data.capacity_bars.length) {
    const bars = data.capacity_bars;
    const trace = {
      type: "bar", orientation: "h", y: bars.map((b) => esc(b.name)), x: bars.map((b) => b.y),
      customdata: bars.map((b) => b.href), hovertext: bars.map((b) => esc(b.text)),
      text: bars.map((b) => fmt(b.y, 1) + " tok/s"), textposition: "auto",
      hovertemplate: "%{y}<br>%{x:,.1f} output tok/s<br>%{hovertext}<extra></extra>",
      marker: { color: "#2a9d8f" },
    };
    // the box grows with the bars (the stylesheet's minimum height suits the line chart, not one bar)
    barEl.style.minHeight = "0";
    barEl.style.height = Math.max(220, 110 + 48 * bars.length) + "px";
    const layout = {
      xaxis: { title: { text: "output tokens/s at the SLO" }, rangemode: "tozero" },
      yaxis: { automargin: true },
      margin: { t: 20, r: 20, b: 50 },
    };
    Plotly.newPlot(barEl, [trace], layout, config).then(() => barEl.on("plotly_click", openRun));
  }
})();
