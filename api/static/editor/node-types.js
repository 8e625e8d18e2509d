// Node types as the engine declares them (GET /rest/node-types, engine/description.py): the node
// creator, the canvas slots and the parameter forms all read these, so they cannot disagree
// with the engine's validation.

export const GROUPS = [
  ["trigger", "Triggers"],
  ["agent", "AI: Agents"],
  ["model", "AI: Models"],
  ["memory", "AI: Memory"],
  ["tool", "AI: Tools"],
  ["core", "Core"],
];

const SLOT_LABELS = { ai_languageModel: "Model", ai_memory: "Memory", ai_tool: "Tool" };

// A slot's name as the node type declares it (the Agent's "Chat Model"), else a generic one.
export function slotLabel(types, typeName, connectionType) {
  const slot = types?.slots(typeName).find((s) => s.type === connectionType);
  return (slot && slot.displayName) || SLOT_LABELS[connectionType] || connectionType;
}

export class NodeTypes {
  constructor(list = []) {
    this.byName = new Map(list.map((t) => [t.name, t]));
  }

  get(name) {
    return this.byName.get(name) || null;
  }

  all() {
    return [...this.byName.values()];
  }

  // The ai_* inputs a type takes ([{type, required, maxConnections, displayName}]).
  slots(typeName) {
    const type = this.get(typeName);
    return type ? type.inputs.filter((i) => i.type !== "main") : [];
  }

  hasMainInput(typeName) {
    const type = this.get(typeName);
    return Boolean(type && type.inputs.some((i) => i.type === "main"));
  }

  hasMainOutput(typeName) {
    const type = this.get(typeName);
    return Boolean(type && type.outputs.includes("main"));
  }

  // How many main inputs and outputs a node has (its ports on the canvas): the declared ones;
  // a node with a "numberInputs" parameter (Merge) takes that many inputs, and a node whose
  // outputs depend on its parameters (`dynamicOutputs`: a Switch) gets one more port than its
  // highest connected output. `connectedOutputs`: that highest index + 1.
  mainPorts(node, connectedOutputs = 0) {
    const type = this.get(node.type);
    if (!type) return { inputs: 1, outputs: 1, outputNames: [], inputNames: [] };
    const declaredIn = type.inputs.filter((i) => i.type === "main").length;
    const wanted = Number((node.parameters || {}).numberInputs) || 0;
    const inputs = declaredIn ? Math.max(declaredIn, wanted) : 0;
    const declaredOut = type.outputs.filter((o) => o === "main").length;
    const outputs = type.dynamicOutputs ? Math.max(declaredOut, connectedOutputs + 1) : declaredOut;
    return { inputs, outputs, outputNames: type.outputNames || [], inputNames: type.inputNames || [] };
  }

  // The connection type a sub-node supplies (ai_tool, ...), or null for a main node.
  supplies(typeName) {
    const type = this.get(typeName);
    return (type && type.outputs.find((o) => o.startsWith("ai_"))) || null;
  }

  // The types that fit an ai_* slot: those supplying that connection type.
  fitting(connectionType) {
    return this.all().filter((t) => t.outputs.includes(connectionType));
  }
}

// n8n's displayOptions: every `show` condition holds and no `hide` condition does, read from
// the values of the property's siblings; `/name` reads the node's root parameters (`root`),
// `@version` the node's typeVersion, and a value may be a condition ({_cnd: {gte: 1.1}}).
// Mirrors engine/description.py `displayed`.
export function displayed(prop, values, version = null, root = null) {
  const conditions = prop.displayOptions || {};
  const lookup = (name) => {
    if (name === "@version") return version;
    if (name.startsWith("/")) return (root || values)[name.slice(1)];
    return values[name];
  };
  for (const [name, allowed] of Object.entries(conditions.show || {})) {
    if (!allowed.some((a) => matches(lookup(name), a))) return false;
  }
  for (const [name, denied] of Object.entries(conditions.hide || {})) {
    if (denied.some((d) => matches(lookup(name), d))) return false;
  }
  return true;
}

const CONDITIONS = {
  eq: (v, x) => v === x,
  not: (v, x) => v !== x,
  gte: (v, x) => v !== null && v !== undefined && v >= x,
  gt: (v, x) => v !== null && v !== undefined && v > x,
  lte: (v, x) => v !== null && v !== undefined && v <= x,
  lt: (v, x) => v !== null && v !== undefined && v < x,
};

function matches(value, allowed) {
  if (allowed && typeof allowed === "object" && "_cnd" in allowed) {
    return Object.entries(allowed._cnd).every(([op, x]) => op in CONDITIONS && CONDITIONS[op](value, x));
  }
  return value === allowed;
}

// The values a form level shows: given or default, for the displayed properties only (a hidden
// parameter counts as absent, as in n8n). Mirrors engine/description.py `shown_values`.
export function shownValues(properties, given, version = null, root = null) {
  let values = withDefaults(properties, given);
  for (let round = 0; round < 2; round += 1) {
    const levelRoot = root || values;
    const next = {};
    for (const prop of properties) {
      if (displayed(prop, values, version, levelRoot)) {
        next[prop.name] = prop.name in given ? given[prop.name] : engineDefault(prop);
      }
    }
    values = next;
  }
  return values;
}

// What the engine reads when a parameter is absent (a collection: its options' defaults).
export function engineDefault(prop) {
  if (prop.type === "collection") {
    return Object.fromEntries((prop.options || []).map((p) => [p.name, engineDefault(p)]));
  }
  return structuredClone(prop.default ?? null);
}

export function withDefaults(properties, values) {
  const merged = {};
  for (const prop of properties) merged[prop.name] = engineDefault(prop);
  return { ...merged, ...values };
}
