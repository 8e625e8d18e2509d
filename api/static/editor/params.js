// The parameter panel: a form generated from the node type's declared properties
// (GET /rest/node-types), showing only what `displayOptions` allow for the node's typeVersion
// (a node whose form changed between versions shows its version's). Values starting with "=" are
// expressions, shown with a preview evaluated by the engine against the node's last run data.
// Every change leaves through onChange(parameters) (one undo step each); every string is
// rendered as text.

import { filterControl } from "./filter.js";
import { displayed, engineDefault, shownValues } from "./node-types.js";
import { el } from "./util.js";

export function parameterForm({ node, type, credentials, onChange, onCredential, preview }) {
  const params = structuredClone(node.parameters || {});
  const commit = () => onChange(params);
  const form = el("div", { class: "params", "data-node": node.name });
  const version = node.typeVersion ?? type.version;
  const root = shownValues(type.properties, params, version);
  const scope = { version, root, preview };
  for (const slot of type.credentials || []) {
    if (!displayed(slot, root, version)) continue;
    form.append(credentialField(slot, node, credentials, onCredential));
  }
  form.append(...fields(type.properties, params, commit, "", scope));
  if (!form.children.length) form.append(el("p", { class: "hint", text: "This node has no parameters." }));
  return form;
}

function fields(properties, target, commit, prefix, scope) {
  const values = shownValues(properties, target, scope.version, prefix ? scope.root : null);
  const out = [];
  const seen = new Set(); // n8n declares a parameter once per case it shows in
  for (const prop of properties) {
    if (seen.has(prop.name) || !displayed(prop, values, scope.version, scope.root)) continue;
    seen.add(prop.name);
    out.push(field(prop, target, commit, `${prefix}${prop.name}`, scope));
  }
  return out;
}

function field(prop, target, commit, path, scope) {
  const preview = scope.preview;
  const value = prop.name in target ? target[prop.name] : engineDefault(prop);
  const set = (v) => {
    target[prop.name] = v;
    commit();
  };
  const label = el("label", { class: "param-label", text: prop.displayName });
  if (prop.required) label.append(el("span", { class: "required", text: " *" }));
  const wrap = el("div", { class: `param type-${prop.type}`, "data-param": path }, label);
  if (!["collection", "fixedCollection", "filter"].includes(prop.type)) {
    const expr = isExpression(value);
    label.append(
      el("button", {
        type: "button",
        class: "expr-toggle",
        "aria-pressed": String(expr),
        title: expr ? "Use a fixed value" : "Use an expression",
        text: "fx",
        onclick: () => set(expr ? fixedValue(prop, value) : asExpression(value)),
      }),
    );
  }
  if (prop.type === "collection") wrap.append(collection(prop, target, commit, path, scope));
  else if (prop.type === "filter") wrap.append(filterControl(prop, value, set, scope));
  else if (prop.type === "fixedCollection") {
    wrap.append(fixedCollection(prop, target, commit, path, scope));
  }
  else wrap.append(...control(prop, value, set, preview));
  if (prop.description) wrap.append(el("small", { class: "muted", text: prop.description }));
  if (prop.required && isEmpty(value)) {
    wrap.classList.add("missing"); // the engine refuses it at save, naming this parameter
    wrap.append(el("small", { class: "error", text: "Required" }));
  }
  return wrap;
}

function isEmpty(value) {
  const raw = value && typeof value === "object" && "__rl" in value ? value.value : value;
  return raw === null || raw === undefined || (typeof raw === "string" && !raw.trim());
}

function isExpression(value) {
  const raw = value && typeof value === "object" && "__rl" in value ? value.value : value;
  return typeof raw === "string" && raw.startsWith("=");
}

function asExpression(value) {
  if (value && typeof value === "object" && "__rl" in value) {
    return { ...value, value: `=${value.value ?? ""}` };
  }
  return `=${asText(value)}`;
}

function asText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

// Back from an expression: its text as the fixed value, where the type can hold it.
function fixedValue(prop, value) {
  if (prop.type === "resourceLocator") return { ...value, value: String(value.value).slice(1) };
  const text = value.slice(1);
  const number = text.trim() === "" ? NaN : Number(text);
  if (prop.type === "number") return Number.isNaN(number) ? engineDefault(prop) : number;
  if (prop.type === "boolean") return text.trim() === "true";
  const known = prop.options?.some((o) => o.value === text);
  if (prop.type === "options") return known ? text : engineDefault(prop);
  return text;
}

function control(prop, value, set, preview) {
  const raw = prop.type === "resourceLocator" && value && typeof value === "object" ? value.value : value;
  if (typeof raw === "string" && raw.startsWith("=")) return expression(prop, value, raw, set, preview);
  if (prop.type === "boolean") {
    const box = el("input", { type: "checkbox", onchange: (e) => set(e.target.checked) });
    box.checked = Boolean(value);
    return [box];
  }
  if (prop.type === "options") {
    const select = el(
      "select",
      { onchange: (e) => set(prop.options[e.target.selectedIndex].value) },
      ...prop.options.map((o) => el("option", { text: o.name, value: String(o.value) })),
    );
    select.selectedIndex = Math.max(0, prop.options.findIndex((o) => o.value === value));
    return [select];
  }
  if (prop.type === "number") {
    const input = el("input", {
      type: "number",
      step: "any",
      onchange: (e) => set(e.target.value === "" ? null : Number(e.target.value)),
    });
    input.value = value === null || value === undefined ? "" : String(value);
    if (prop.typeOptions?.minValue !== undefined) input.min = String(prop.typeOptions.minValue);
    return [input];
  }
  if (prop.type === "resourceLocator") {
    const input = el("input", {
      type: "text",
      onchange: (e) => set({ __rl: true, mode: "id", ...(value || {}), value: e.target.value }),
    });
    input.value = raw ?? "";
    return [input];
  }
  return [text(prop, value, set)];
}

function text(prop, value, set) {
  const multiline = (prop.typeOptions?.rows || 0) > 1 || prop.type === "json";
  const input = multiline
    ? el("textarea", { rows: String(prop.typeOptions?.rows || 3) })
    : el("input", { type: "text", placeholder: prop.placeholder || "" });
  input.value = asText(value);
  input.addEventListener("change", (e) => set(e.target.value));
  return input;
}

function expression(prop, value, raw, set, preview) {
  const input = el("textarea", { class: "expression", rows: "2" });
  input.value = raw;
  input.addEventListener("change", (e) => {
    const next = e.target.value;
    set(prop.type === "resourceLocator" ? { ...(value || {}), value: next } : next);
  });
  const shown = el("div", { class: "expr-preview muted", text: "…" });
  preview(raw).then(
    (result) => (shown.textContent = result),
    (err) => {
      shown.textContent = err.message;
      shown.classList.add("error");
    },
  );
  return [el("span", { class: "expr-badge", text: "Expression" }), input, shown];
}

// A collection: the options the user added, each removable, and a picker for the others that
// the node's version and parameters show (one entry per name).
function collection(prop, target, commit, path, scope) {
  const current = target[prop.name] && typeof target[prop.name] === "object" ? target[prop.name] : {};
  target[prop.name] = current;
  const box = el("div", { class: "collection" });
  const values = { ...engineDefault(prop), ...current };
  const shown = [];
  for (const option of prop.options) {
    const dup = shown.some((o) => o.name === option.name);
    if (!dup && displayed(option, values, scope.version, scope.root)) shown.push(option);
  }
  const present = shown.filter((o) => o.name in current);
  for (const child of present) {
    const row = field(child, current, commit, `${path}.${child.name}`, scope);
    row.prepend(
      el("button", {
        type: "button",
        class: "remove",
        "aria-label": `Remove ${child.displayName}`,
        text: "×",
        onclick: () => {
          delete current[child.name];
          commit();
        },
      }),
    );
    box.append(row);
  }
  const missing = shown.filter((o) => !(o.name in current));
  if (missing.length) {
    const picker = el(
      "select",
      { class: "add-option", "data-param": path },
      el("option", { text: prop.placeholder || "Add option", value: "" }),
      ...missing.map((o) => el("option", { text: o.displayName, value: o.name })),
    );
    picker.addEventListener("change", () => {
      const child = missing.find((o) => o.name === picker.value);
      if (!child) return;
      current[child.name] = engineDefault(child);
      commit();
    });
    box.append(picker);
  }
  return box;
}

// A fixedCollection: named groups of rows (multipleValues) or one object each.
function fixedCollection(prop, target, commit, path, scope) {
  const current = target[prop.name] && typeof target[prop.name] === "object" ? target[prop.name] : {};
  target[prop.name] = current;
  const multiple = Boolean(prop.typeOptions?.multipleValues);
  const box = el("div", { class: "fixed-collection" });
  for (const group of prop.options) {
    const rows = multiple ? current[group.name] || [] : current[group.name] ? [current[group.name]] : [];
    rows.forEach((row, i) => {
      const rowBox = el("div", { class: "fc-row", "data-group": group.name });
      rowBox.append(...fields(group.values, row, commit, `${path}.${group.name}[${i}].`, scope));
      rowBox.append(
        el("button", {
          type: "button",
          class: "remove",
          text: "×",
          "aria-label": `Remove ${group.displayName}`,
          onclick: () => {
            if (multiple) rows.splice(i, 1);
            else delete current[group.name];
            if (multiple && !rows.length) delete current[group.name];
            commit();
          },
        }),
      );
      box.append(rowBox);
    });
    if (multiple || !rows.length) {
      box.append(
        el("button", {
          type: "button",
          class: "add-row",
          "data-group": group.name,
          text: `Add ${group.displayName}`,
          onclick: () => {
            const fresh = Object.fromEntries(group.values.map((v) => [v.name, engineDefault(v)]));
            if (multiple) current[group.name] = [...rows, fresh];
            else current[group.name] = fresh;
            commit();
          },
        }),
      );
    }
  }
  return box;
}

// The credential picker: the deployment's credentials of the right type, by name.
function credentialField(slot, node, credentials, onCredential) {
  const mine = credentials.filter((c) => c.type === slot.name);
  const chosen = (node.credentials || {})[slot.name];
  const select = el(
    "select",
    {},
    el("option", { text: slot.required ? "— choose a credential —" : "— none —", value: "" }),
    ...mine.map((c) => el("option", { text: c.name, value: c.id })),
  );
  const matches = (c) => chosen && (c.id === chosen.id || (!chosen.id && c.name === chosen.name));
  const index = mine.findIndex(matches);
  select.selectedIndex = index + 1;
  select.addEventListener("change", () => onCredential(slot.name, mine[select.selectedIndex - 1] || null));
  const wrap = el(
    "div",
    { class: "param credential", "data-credential": slot.name },
    el("label", { class: "param-label", text: `Credential (${slot.name})` }),
    select,
  );
  if (!mine.length) {
    wrap.append(
      el("small", {
        class: "muted",
        text: `No ${slot.name} credential: add one to MINI_N8N_CREDENTIALS_FILE.`,
      }),
    );
  }
  return wrap;
}
