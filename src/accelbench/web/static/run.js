/* Run form: the framework follows the instance's tier (the server's DEFAULT_RUNTIME table, sent as data),
   GPU-only fields are hidden and cleared on CPU and Neuron instances, a run measures a sweep or a capacity
   search (the spec then has a capacity section and no sweep), and the spec is POSTed to the API. */
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("form-data").textContent);
  const $ = function (id) { return document.getElementById(id); };
  const form = $("run-form"), instance = $("instance"), engine = $("engine"), target = $("target");
  const gpuOnly = document.querySelectorAll("[data-gpu-only]"), cpuOnly = document.querySelectorAll("[data-cpu-only]");
  const errorBox = $("run-error");

  function capacityMode() { return $("mode-capacity").checked; }
  function onModeChange() {
    const cap = capacityMode();
    $("capacity-fields").hidden = !cap;
    $("sweep-fields").hidden = cap;
  }

  function tier() { return instance.selectedOptions[0].dataset.tier; }
  function isLocal() { return instance.selectedOptions[0].dataset.local === "1"; }

  function clearFields(container) {
    container.querySelectorAll("input, select").forEach(function (el) {
      if (el.tagName === "SELECT") el.selectedIndex = 0; else el.value = "";
    });
  }

  function onInstanceChange() {
    const t = tier();
    // Framework: only the runtimes that serve this tier, the tier's default selected.
    engine.innerHTML = "";
    Object.keys(data.runtimes).sort().forEach(function (name) {
      if (data.runtimes[name].indexOf(t) < 0) return;
      if (isLocal() && ["vllm-cpu", "llamacpp"].indexOf(name) < 0) return;
      const o = document.createElement("option"); o.value = name; o.textContent = name; engine.appendChild(o);
    });
    engine.value = data.default_runtime[t];
    $("engine-note").textContent = `default for ${t.toUpperCase()} instances`;
    // GPU-only settings: hidden AND cleared, so a hidden value can never be submitted.
    gpuOnly.forEach(function (el) { const on = t === "gpu"; el.hidden = !on; if (!on) clearFields(el); });
    cpuOnly.forEach(function (el) { const on = t === "cpu"; el.hidden = !on; if (!on) clearFields(el); });
    if (isLocal()) { target.value = "local"; target.disabled = true; }
    else { target.disabled = false; if (target.value === "local") target.value = "kubernetes"; }
  }

  function ints(text, what) {
    const parts = text.split(",").map(function (s) { return s.trim(); }).filter(Boolean);
    const nums = parts.map(Number);
    if (!parts.length || nums.some(function (n) { return !Number.isInteger(n) || n < 1; })) {
      throw new Error(`${what}: write whole numbers of at least 1 separated by commas, e.g. 128,512.`);
    }
    return nums;
  }
  function num(id) { const v = $(id).value.trim(); return v === "" ? null : Number(v); }

  // The capacity section: the targets given (each optional; none: the knee), the rest when filled in. Bounds
  // are the API's to check, and its refusals are shown like any other.
  function capacitySpec() {
    const cap = { load: $("cap_load").value, endpoint: $("endpoint").value };
    [["input_len", "cap_input_len"], ["output_len", "cap_output_len"], ["percentile", "cap_percentile"],
     ["attainment", "cap_attainment"], ["max_load", "cap_max_load"], ["max_probes", "cap_max_probes"]]
      .forEach(function (p) { const v = num(p[1]); if (v !== null) cap[p[0]] = v; });
    const slo = {};
    document.querySelectorAll("#capacity-fields [data-slo]").forEach(function (el) {
      const v = el.value.trim();
      if (v !== "") slo[el.dataset.slo] = Number(v);
    });
    if (Object.keys(slo).length) cap.slo = slo;
    return cap;
  }
  function sweepSpec() {
    return {
      input_lens: ints($("input_lens").value, "Input lengths"),
      concurrency: ints($("concurrency").value, "Concurrency"),
      repeats: num("repeats") || 1,
      output_len: num("output_len") || 128,
      prompts_per_concurrency: num("prompts_per_concurrency") || 10,
      endpoint: $("endpoint").value,
    };
  }

  function buildSpec() {
    const t = tier();
    const settings = {};
    [["max_model_len", "max_model_len"], ["max_num_seqs", "max_num_seqs"], ["tensor_parallel_size", "tensor_parallel_size"]]
      .forEach(function (p) { const v = num(p[0]); if (v !== null) settings[p[1]] = v; });
    if ($("quantization").value) settings.quantization = $("quantization").value;
    if (t === "cpu" && num("kv_cache_space_gib") !== null) settings.kv_cache_space_gib = num("kv_cache_space_gib");
    if (t === "gpu") {
      if (num("gpu_memory_utilization") !== null) settings.gpu_memory_utilization = num("gpu_memory_utilization");
      if ($("kv_cache_dtype").value) settings.kv_cache_dtype = $("kv_cache_dtype").value;
      if ($("deployment_mode").value) settings.deployment_mode = $("deployment_mode").value;
    }
    const spec = {
      model: $("model").value.trim(),
      engine: { name: engine.value, settings: settings },
      target: { kind: isLocal() ? "local" : target.value },
    };
    if (capacityMode()) spec.capacity = capacitySpec(); else spec.sweep = sweepSpec();
    if (!spec.model) throw new Error("Model: choose or type a model name.");
    if ($("label").value.trim()) spec.label = $("label").value.trim();
    if (!isLocal()) spec.instance_type = instance.value;
    if ($("engine_version").value.trim()) spec.engine.version = $("engine_version").value.trim();
    if ($("hf_token").value) spec.hf_token = $("hf_token").value;
    return spec;
  }

  form.addEventListener("submit", async function (ev) {
    ev.preventDefault();
    errorBox.hidden = true;
    let spec;
    try { spec = buildSpec(); } catch (err) { accelbench.showError(errorBox, err); return; }
    const btn = $("submit"); btn.disabled = true;
    try {
      const res = await accelbench.api("POST", "/api/v1/runs", spec);
      $("hf_token").value = "";
      location.href = `/runs/${encodeURIComponent(res.id)}`;
    } catch (err) { btn.disabled = false; accelbench.showError(errorBox, err); }
  });
  // Preview: the API's dry run of the same spec (the same checks a queued run passes), shown as text only.
  // A capacity search's preview: what the spec asks for, and what the dry run resolved (its first level, the
  // requests per level, the planner's capacity) when it says.
  function searchText(plan, cap) {
    const c = plan.capacity || {};
    const load = c.load || cap.load;
    const unit = load === "request_rate" ? "requests/s" : "users";
    const pick = function (a, b, d) { return a != null ? a : b != null ? b : d; };
    const slo = c.slo || (cap.slo ? `p${pick(cap.percentile, null, 90)} ` +
      Object.entries(cap.slo).map(function (kv) { return `${kv[0]} <= ${kv[1]} ms`; }).join(", ") : "");
    let text = `Capacity search by ${load}: at most ${pick(c.max_probes, cap.max_probes, 12)} levels, ` +
      `up to ${pick(c.max_load, cap.max_load, 256)} ${unit}, ${slo ? `judged at ${slo}` : "no SLO: finds the knee"}.`;
    if (c.start != null) text += ` Starts at ${c.start} ${unit} (${c.start_from}).`;
    if (c.requests_per_level != null) text += ` ${c.requests_per_level} requests judged per level, ${c.requests_at_most} at most in all.`;
    if (c.predicted_max_load != null) text += ` The planner predicts a capacity of ${c.predicted_max_load} ${unit}.`;
    if (plan.predicted_duration_s != null) text += ` Predicted ${(plan.predicted_duration_s / 60).toFixed(1)} min of load.`;
    else if (c.start == null) text += " The search sets each level's requests, so its duration is not predicted.";
    return text;
  }
  function renderPreview(plan, spec) {
    const where = plan.instance_type || "this machine";
    $("preview-summary").textContent =
      `${plan.model} with ${plan.runtime} ${plan.engine_version} on ${plan.target} (${where}, ${plan.accelerator_type})`;
    $("preview-image").textContent = plan.image ? `Image: ${plan.image}` : "";
    $("preview-command").textContent = plan.argv.join(" ");
    const fill = function (id, items) {
      const list = $(id); list.replaceChildren();
      items.forEach(function (text) { const li = document.createElement("li"); li.textContent = text; list.appendChild(li); });
    };
    fill("preview-env", Object.entries(plan.env).map(function (kv) { return `${kv[0]}=${kv[1]}`; }));
    fill("preview-warnings", plan.warnings.map(function (w) { return `Warning: ${w}`; }));
    const body = $("preview-cells").querySelector("tbody"); body.replaceChildren();
    $("preview-cells").hidden = Boolean(spec.capacity);
    if (spec.capacity) {
      $("preview-total").textContent = searchText(plan, spec.capacity);
      $("preview").hidden = false;
      return;
    }
    plan.cells.forEach(function (c) {
      const tr = document.createElement("tr");
      [c.input_len, c.concurrency, c.repeats, c.requests, c.predicted_s == null ? "" : c.predicted_s].forEach(function (v) {
        const td = document.createElement("td"); td.textContent = String(v); tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    let total = `${plan.requests} requests in all`;
    if (plan.predicted_duration_s != null) {
      total += `; predicted ${(plan.predicted_duration_s / 60).toFixed(1)} min of load`;
      if (plan.predicted_cost_usd != null) total += `, $${plan.predicted_cost_usd.toFixed(2)} at $${plan.hourly_usd.toFixed(3)}/h`;
    }
    $("preview-total").textContent = `${total}. ${plan.prediction_notes.map(function (n) { return `(${n})`; }).join(" ")}`;
    $("preview").hidden = false;
  }
  $("preview-button").addEventListener("click", async function () {
    errorBox.hidden = true;
    $("preview").hidden = true;
    let spec;
    try { spec = buildSpec(); } catch (err) { accelbench.showError(errorBox, err); return; }
    delete spec.hf_token;  // a preview needs no secret
    try { renderPreview(await accelbench.api("POST", "/api/v1/runs?dry_run=true", spec), spec); }
    catch (err) { accelbench.showError(errorBox, err); }
  });
  instance.addEventListener("change", onInstanceChange);
  document.querySelectorAll("input[name=mode]").forEach(function (el) { el.addEventListener("change", onModeChange); });
  onInstanceChange();
  onModeChange();
})();
