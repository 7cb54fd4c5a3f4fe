/* Configuration: PUT the changed tool versions (empty fields keep the current value). */
"use strict";
(function () {
  const form = document.getElementById("versions-form");
  const errorBox = document.getElementById("config-error"), ok = document.getElementById("config-ok");
  form.addEventListener("submit", async function (ev) {
    ev.preventDefault();
    errorBox.hidden = true; ok.hidden = true;
    const versions = {};
    form.querySelectorAll("input[name]").forEach(function (i) { if (i.value.trim()) versions[i.name] = i.value.trim(); });
    if (!Object.keys(versions).length) { accelbench.showError(errorBox, { message: "Type a new version in at least one row first." }); return; }
    try {
      const res = await accelbench.api("PUT", "/api/v1/config/tool-versions", { versions });
      ok.hidden = false;
      ok.querySelector(".message").textContent = res.changed.length ? `Changed: ${res.changed.join(", ")}.` + (res.shadowed.length ? ` Still overridden by the environment: ${res.shadowed.join(", ")}.` : "") : "Nothing changed.";
      setTimeout(function () { location.reload(); }, 800);
    } catch (err) { accelbench.showError(errorBox, err); }
  });
})();
