/* Compare page: runs are compared in the order they were ticked, the baseline is picked among the ticked runs
   (the first ticked by default), and the charts (plotly figures built by the report layer) are drawn. */
"use strict";
(function () {
  const form = document.getElementById("compare-form");
  const select = document.getElementById("compare-baseline");
  if (form && select) {
    const boxes = Array.from(form.querySelectorAll("input[type=checkbox][name=runs]"));
    // the order the runs were ticked in; the server's order for the runs already chosen
    let order = boxes.filter((b) => b.checked)
      .sort((a, b) => Number(a.dataset.tick || 0) - Number(b.dataset.tick || 0))
      .map((b) => b.value);
    const labelOf = (box) => {
      const text = box.parentElement.textContent.replace(/\s+/g, " ").trim();
      return text.split(" · ")[0];
    };
    const refill = () => {
      const keep = select.value;
      select.textContent = "";
      order.forEach((id, i) => {
        const box = boxes.find((b) => b.value === id);
        const opt = document.createElement("option");
        opt.value = id;
        opt.textContent = labelOf(box) + (i === 0 ? " (first ticked)" : "");
        select.appendChild(opt);
      });
      if (order.includes(keep)) select.value = keep;
      else if (order.length) select.value = order[0];
    };
    boxes.forEach((b) => b.addEventListener("change", () => {
      order = order.filter((id) => id !== b.value);
      if (b.checked) order.push(b.value);
      refill();
    }));
    refill();
    form.addEventListener("submit", () => {
      // send the runs in tick order (a form sends checkboxes in page order)
      boxes.forEach((b) => { b.disabled = true; });
      order.forEach((id) => {
        const hidden = document.createElement("input");
        hidden.type = "hidden";
        hidden.name = "runs";
        hidden.value = id;
        form.appendChild(hidden);
      });
    });
  }
  if (!window.Plotly) return;
  const draw = (el, fig) => Plotly.newPlot(el, fig.data, fig.layout, { displaylogo: false, responsive: true });
  const cap = document.getElementById("capacity-chart-data");
  const capEl = document.getElementById("chart-capacity");
  if (cap && capEl) draw(capEl, JSON.parse(cap.textContent));
  const block = document.getElementById("compare-chart-data");
  if (!block) return;
  JSON.parse(block.textContent).forEach((c) => {
    const el = document.getElementById(c.id);
    if (el) draw(el, c.figure);
  });
})();
