/* Shared helpers of the pages: calls to the JSON API with the sign-in cookie, errors shown in words. */
"use strict";
window.accelbench = (function () {
  // Cookie-authenticated writes must carry this header: a cross-site form cannot send it.
  async function api(method, path, body) {
    const opts = { method, credentials: "same-origin", headers: { "X-Requested-With": "accelbench", "Accept": "application/json" } };
    if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
    const res = await fetch(path, opts);
    let data = null;
    const text = await res.text();
    if (text) { try { data = JSON.parse(text); } catch (e) { data = { raw: text }; } }
    if (!res.ok) {
      const err = (data && data.error) || { message: `HTTP ${res.status}`, hint: null };
      if (res.status === 401 && !err.hint) err.hint = "Sign in at /login.";
      const e = new Error(err.message); e.status = res.status; e.hint = err.hint; e.type = err.type; throw e;
    }
    return data;
  }
  function showError(box, err) {
    if (!box) { alert(err.message); return; }
    box.hidden = false;
    box.querySelector(".message").textContent = err.message;
    const hint = box.querySelector(".hint");
    if (hint) {
      hint.textContent = err.hint || "";
      if (err.status === 401) {
        const a = document.createElement("a"); a.href = "/login?next=" + encodeURIComponent(location.pathname); a.textContent = " Sign in.";
        hint.appendChild(a);
      }
    }
  }
  function bindRunActions(errorBox) {
    document.querySelectorAll("button[data-action]").forEach(function (btn) {
      btn.addEventListener("click", async function () {
        const id = btn.dataset.run, action = btn.dataset.action;
        if (action === "delete" && !confirm(`Delete run ${id} and all its results?`)) return;
        if (btn.dataset.confirm && !confirm(btn.dataset.confirm)) return;  // e.g. what cancelling a run does
        btn.disabled = true;
        try {
          if (action === "cancel") await api("POST", `/api/v1/runs/${encodeURIComponent(id)}/cancel`);
          else await api("DELETE", `/api/v1/runs/${encodeURIComponent(id)}`);
          location.reload();
        } catch (err) { btn.disabled = false; showError(errorBox, err); }
      });
    });
  }
  return { api, showError, bindRunActions };
})();
