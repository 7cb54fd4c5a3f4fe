/* Sortable tables (the Estimate and Catalog pages): each header of a sortable column is a button; a click
   sorts the rows by that column's data-sort values (numbers as numbers, blanks last either way), a second
   click reverses it, and the header's aria-sort says the order. No library. */
"use strict";
window.accelbenchSortable = function (table, onSorted) {
  if (!table || !table.tBodies.length) return null;
  const body = table.tBodies[0];
  const heads = Array.from(table.querySelectorAll("thead th[data-key]"));
  Array.from(body.rows).forEach(function (r, i) { r.dataset.order = String(i); });
  function key(row, index, numeric) {
    const cell = row.cells[index];
    if (!cell) return null;
    const raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
    if (raw === "" || raw === null) return null;
    if (!numeric) return raw.toLowerCase();
    const n = parseFloat(raw);
    return Number.isFinite(n) ? n : null;
  }
  function sortBy(th, direction) {
    const index = th.cellIndex, numeric = th.dataset.kind === "num", sign = direction === "descending" ? -1 : 1;
    const rows = Array.from(body.rows).filter(function (r) { return !r.querySelector("td.empty"); });
    const keyed = rows.map(function (r) { return { r: r, k: key(r, index, numeric), o: Number(r.dataset.order) }; });
    keyed.sort(function (a, b) {
      if (a.k === null || b.k === null) return a.k === b.k ? a.o - b.o : (a.k === null ? 1 : -1);
      let c = numeric ? a.k - b.k : a.k.localeCompare(b.k, undefined, { numeric: true });
      if (c === 0) c = a.o - b.o; else c *= sign;
      return c;
    });
    const frag = document.createDocumentFragment();
    keyed.forEach(function (x) { frag.appendChild(x.r); });
    body.appendChild(frag);
    heads.forEach(function (h) { h.setAttribute("aria-sort", h === th ? direction : "none"); });
    if (onSorted) onSorted(th.dataset.key, direction);
  }
  heads.forEach(function (th) {
    const button = th.querySelector("button");
    if (!button) return;
    button.addEventListener("click", function () {
      sortBy(th, th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending");
    });
  });
  return { sortBy: sortBy };
};
