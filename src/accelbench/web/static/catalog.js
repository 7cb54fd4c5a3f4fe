/* Catalog page: the search filters rows as you type (every word must occur in a row's data-search text, the
   rule web/catalog_view.py applies to ?q= without script), the tier chips narrow it further, the headers sort
   (sortable.js), and the address bar keeps the view (accelerator_type, q, sort, dir) so it can be linked. */
"use strict";
(function () {
  const table = document.getElementById("catalog");
  const input = document.getElementById("catalog-q");
  const form = document.getElementById("catalog-search");
  const count = document.getElementById("catalog-count");
  const empty = document.getElementById("catalog-empty");
  const chips = document.querySelectorAll(".chip[data-tier]");
  if (!table || !input) return;
  const rows = Array.from(table.tBodies[0].rows);
  const params = new URLSearchParams(window.location.search);
  const state = {
    tier: params.get("accelerator_type") || "all",
    q: input.value,
    sort: params.get("sort") || "",
    dir: params.get("dir") || "",
  };

  function url(tier) {
    const p = new URLSearchParams();
    if (tier && tier !== "all") p.set("accelerator_type", tier);
    if (state.q.trim()) p.set("q", state.q.trim());
    if (state.sort) { p.set("sort", state.sort); p.set("dir", state.dir || "asc"); }
    const text = p.toString();
    return "/catalog" + (text ? "?" + text : "");
  }

  function apply() {
    const terms = state.q.toLowerCase().split(/\s+/).filter(Boolean).slice(0, 12);
    let shown = 0;
    rows.forEach(function (r) {
      const text = r.dataset.search || "";
      const on = (state.tier === "all" || r.dataset.tier === state.tier) &&
        terms.every(function (t) { return text.indexOf(t) !== -1; });
      r.hidden = !on;
      if (on) shown++;
    });
    chips.forEach(function (c) {
      const on = c.dataset.tier === state.tier;
      c.classList.toggle("on", on);
      c.setAttribute("aria-pressed", on ? "true" : "false");
      c.setAttribute("href", url(c.dataset.tier));  // a chip opened in a new tab keeps the search and sort
    });
    if (count) count.textContent = `${shown} of ${rows.length} instance types`;
    if (empty) empty.hidden = shown > 0;
    history.replaceState(null, "", url(state.tier));
  }

  input.addEventListener("input", function () { state.q = input.value; apply(); });
  if (form) form.addEventListener("submit", function (ev) { ev.preventDefault(); state.q = input.value; apply(); });
  chips.forEach(function (c) {
    c.addEventListener("click", function (ev) {
      ev.preventDefault();
      state.tier = c.dataset.tier;
      apply();
    });
  });
  // "/" jumps to the search box, as on most sites with one (not while typing in a field)
  document.addEventListener("keydown", function (ev) {
    const t = ev.target;
    if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement) return;
    ev.preventDefault();
    input.focus();
  });
  window.accelbenchSortable(table, function (key, direction) {
    state.sort = key;
    state.dir = direction === "descending" ? "desc" : "asc";
    history.replaceState(null, "", url(state.tier));
    chips.forEach(function (c) { c.setAttribute("href", url(c.dataset.tier)); });
  });
  apply();
})();
