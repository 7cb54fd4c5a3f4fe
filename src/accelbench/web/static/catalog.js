/* Catalog filter chips: filter rows in place (the links still work without script). */
"use strict";
(function () {
  const chips = document.querySelectorAll(".chip[data-tier]");
  const rows = document.querySelectorAll("#catalog tbody tr");
  const count = document.getElementById("catalog-count");
  function apply(tier) {
    let shown = 0;
    rows.forEach(function (r) { const on = tier === "all" || r.dataset.tier === tier; r.hidden = !on; if (on) shown++; });
    chips.forEach(function (c) { const on = c.dataset.tier === tier; c.classList.toggle("on", on); c.setAttribute("aria-pressed", on ? "true" : "false"); });
    if (count) count.textContent = `${shown} instance types`;
  }
  chips.forEach(function (c) {
    c.addEventListener("click", function (ev) {
      ev.preventDefault(); apply(c.dataset.tier);
      history.replaceState(null, "", c.getAttribute("href"));
    });
  });
  const on = document.querySelector(".chip.on");
  apply(on ? on.dataset.tier : "all");
})();
