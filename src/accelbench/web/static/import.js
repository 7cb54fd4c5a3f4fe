/* The Import page: the files go to POST /api/v1/imports/{tool} as a cookie-authenticated write (with the
   X-Requested-With header every page write carries); the new run's page is opened, or the refusal is shown
   beside the field it concerns. Nothing is stored unless every file reads (the service reads them all first). */
"use strict";
(function () {
  const $ = function (id) { return document.getElementById(id); };
  const form = $("import-form"), tool = $("tool");
  const FIELDS = ["tool", "files", "label", "engine", "engine_version", "instance"];

  tool.addEventListener("change", function () {
    const option = tool.options[tool.selectedIndex];
    $("files-expected").textContent = `Expected: ${option.dataset.expected}.`;
    form.action = `/api/v1/imports/${encodeURIComponent(tool.value)}`;
  });

  function clearErrors() {
    $("import-error").hidden = true;
    FIELDS.forEach(function (name) {
      const box = $(`${name}-error`), field = $(name);
      if (box && !box.id.startsWith("tool")) { box.hidden = true; box.textContent = ""; }
      if (field && name !== "tool") { field.removeAttribute("aria-invalid"); }
    });
  }
  // Which field a refusal concerns: the API's field list for a malformed request, else the service's words.
  function fieldOf(err) {
    const text = err.message || "";
    const loc = (err.fields || []).map(function (f) { return f.loc.join("."); }).join(" ");
    if (/\blabel\b/.test(loc) || /^--label\b/.test(text)) return "label";
    if (/^--engine-version\b/.test(text)) return "engine_version";
    if (/instance type/i.test(text)) return "instance";
    if (err.status === 404 && /import|importer|tool/i.test(text)) return "tool";
    if (err.status === 401 || err.status === 403 || err.status === 429) return null;
    return "files";
  }
  function showFieldError(name, err) {
    const box = $(`${name}-error`);
    if (!box) return false;
    box.textContent = err.hint ? `${err.message} ${err.hint}` : err.message;
    box.hidden = false;
    const field = $(name);
    field.setAttribute("aria-invalid", "true");
    field.setAttribute("aria-describedby", name === "files" ? "files-expected files-error" : box.id);
    if (field.closest("details")) field.closest("details").open = true;
    return true;
  }

  form.addEventListener("submit", async function (ev) {
    ev.preventDefault();
    clearErrors();
    const files = Array.from($("files").files);
    const body = new FormData();
    files.forEach(function (f) { body.append("files", f, f.name); });
    const label = $("label").value.trim() ||
      `${tool.value}: ${files.map(function (f) { return f.name; }).join(", ")}`.slice(0, 200);
    body.append("label", label);
    ["engine", "engine_version", "instance"].forEach(function (name) {
      const v = $(name).value.trim();
      if (v) body.append(name, v);
    });
    const btn = $("import-submit"); btn.disabled = true;
    try {
      const res = await fetch(`/api/v1/imports/${encodeURIComponent(tool.value)}`, {
        method: "POST", body, credentials: "same-origin",
        headers: { "X-Requested-With": "accelbench", "Accept": "application/json" },
      });
      const data = await res.json().catch(function () { return null; });
      if (res.ok && data && data.run_id) {
        location.href = `/runs/${encodeURIComponent(data.run_id)}`;
        return;
      }
      const e = (data && data.error) || { message: `HTTP ${res.status}` };
      const err = { message: e.message, hint: e.hint, fields: e.fields, status: res.status };
      if (res.status === 401 && !err.hint) err.hint = "Sign in at /login.";
      const name = fieldOf(err);
      if (!name || !showFieldError(name, err)) accelbench.showError($("import-error"), err);
    } catch (err) {
      accelbench.showError($("import-error"), err);
    }
    btn.disabled = false;
  });
})();
