/* Configuration: PUT the changed tool versions (empty fields keep the current value). */
"use strict";
(function () {
  const form = document.getElementById("versions-form");
  const errorBox = document.getElementById("config-error"), ok = document.getElementById("config-ok");
  // A refusal of one tool's version ("Version 'x' for vllm is not a version ...") is said beside that row's field.
  function besideItsRow(err, keys) {
    const key = keys.find(function (k) { return (err.message || "").includes(` for ${k} is `); });
    const box = key && document.getElementById(`version-${key}-error`);
    if (!box) return false;
    box.textContent = err.hint ? `${err.message} ${err.hint}` : err.message;
    box.hidden = false;
    const input = form.querySelector(`input[name="${key}"]`);
    input.setAttribute("aria-invalid", "true"); input.setAttribute("aria-describedby", box.id);
    return true;
  }
  form.addEventListener("submit", async function (ev) {
    ev.preventDefault();
    errorBox.hidden = true; ok.hidden = true;
    form.querySelectorAll(".field-error").forEach(function (e) { e.hidden = true; e.textContent = ""; });
    form.querySelectorAll("input[aria-invalid]").forEach(function (i) { i.removeAttribute("aria-invalid"); i.removeAttribute("aria-describedby"); });
    const versions = {};
    form.querySelectorAll("input[name]").forEach(function (i) { if (i.value.trim()) versions[i.name] = i.value.trim(); });
    if (!Object.keys(versions).length) { accelbench.showError(errorBox, { message: "Type a new version in at least one row first." }); return; }
    try {
      const res = await accelbench.api("PUT", "/api/v1/config/tool-versions", { versions });
      ok.hidden = false;
      ok.querySelector(".message").textContent = res.changed.length ? `Changed: ${res.changed.join(", ")}.` + (res.shadowed.length ? ` Still overridden by the environment: ${res.shadowed.join(", ")}.` : "") : "Nothing changed.";
      setTimeout(function () { location.reload(); }, 800);
    } catch (err) { if (!besideItsRow(err, Object.keys(versions))) accelbench.showError(errorBox, err); }
  });
})();
