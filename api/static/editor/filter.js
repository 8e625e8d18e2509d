// The conditions of an If, Filter or Switch node (n8n's "filter" parameter): a row per
// condition (left value, operator, right value), and how they combine (AND / OR). The value is
// kept in n8n's shape, so an export from n8n edits here and back unchanged:
// {conditions: [{id, leftValue, rightValue, operator: {type, operation, rightType?,
// singleValue?}}], combinator, options: {caseSensitive, leftValue, typeValidation, version}}.
// `options` follow the node's settings as n8n's editor writes them (typeOptions.filter): the
// engine reads them, not the node's own "Ignore Case" and "Convert types" (engine/conditions.py).

import { el, randomId } from "./util.js";

// [type, operation, label, extra operator fields]
const OPERATORS = [
  ...[
    ["exists", "exists"], ["notExists", "does not exist"], ["empty", "is empty"],
    ["notEmpty", "is not empty"], ["equals", "is equal to"], ["notEquals", "is not equal to"],
    ["contains", "contains"], ["notContains", "does not contain"], ["startsWith", "starts with"],
    ["notStartsWith", "does not start with"], ["endsWith", "ends with"],
    ["notEndsWith", "does not end with"], ["regex", "matches regex"],
    ["notRegex", "does not match regex"],
  ].map(([op, label]) => ["string", op, `String: ${label}`]),
  ...[
    ["exists", "exists"], ["notExists", "does not exist"], ["empty", "is empty"],
    ["notEmpty", "is not empty"], ["equals", "is equal to"], ["notEquals", "is not equal to"],
    ["gt", "is greater than"], ["lt", "is less than"], ["gte", "is greater than or equal to"],
    ["lte", "is less than or equal to"],
  ].map(([op, label]) => ["number", op, `Number: ${label}`]),
  ...[
    ["exists", "exists"], ["notExists", "does not exist"], ["empty", "is empty"],
    ["notEmpty", "is not empty"], ["equals", "is equal to"], ["notEquals", "is not equal to"],
    ["after", "is after"], ["before", "is before"], ["afterOrEquals", "is after or equal to"],
    ["beforeOrEquals", "is before or equal to"],
  ].map(([op, label]) => ["dateTime", op, `Date & Time: ${label}`]),
  ...[
    ["exists", "exists"], ["notExists", "does not exist"], ["empty", "is empty"],
    ["notEmpty", "is not empty"], ["true", "is true"], ["false", "is false"],
    ["equals", "is equal to"], ["notEquals", "is not equal to"],
  ].map(([op, label]) => ["boolean", op, `Boolean: ${label}`]),
  ...[
    ["exists", "exists"], ["notExists", "does not exist"], ["empty", "is empty"],
    ["notEmpty", "is not empty"], ["contains", "contains", "any"],
    ["notContains", "does not contain", "any"], ["lengthEquals", "length equal to", "number"],
    ["lengthNotEquals", "length not equal to", "number"], ["lengthGt", "length greater than", "number"],
    ["lengthLt", "length less than", "number"], ["lengthGte", "length greater than or equal to", "number"],
    ["lengthLte", "length less than or equal to", "number"],
  ].map(([op, label, rightType]) => ["array", op, `Array: ${label}`, rightType]),
  ...[
    ["exists", "exists"], ["notExists", "does not exist"], ["empty", "is empty"],
    ["notEmpty", "is not empty"],
  ].map(([op, label]) => ["object", op, `Object: ${label}`]),
];
const SINGLE = new Set(["exists", "notExists", "empty", "notEmpty", "true", "false"]);

function operatorOf(type, operation, rightType) {
  const operator = { type, operation };
  if (rightType) operator.rightType = rightType;
  if (SINGLE.has(operation)) operator.singleValue = true;
  return operator;
}

// n8n's typeOptions.filter, given the node's parameters and version (`filter`: the node type's
// declaration, {looseSince, versions: [[fromNodeVersion, filterVersion], ...]}).
export function filterOptions(filter, root, version) {
  const options = root.options || {};
  const loose = version < (filter.looseSince ?? 0) ? options.looseTypeValidation : root.looseTypeValidation;
  const found = (filter.versions || []).find(([from]) => version >= from);
  return {
    caseSensitive: !options.ignoreCase,
    leftValue: "",
    typeValidation: loose ? "loose" : "strict",
    version: found ? found[1] : 1,
  };
}

function typed(text, type) {
  if (text.startsWith("=") || text.trim() === "") return text;
  if (type === "number" && !Number.isNaN(Number(text))) return Number(text);
  if (type === "boolean" && (text === "true" || text === "false")) return text === "true";
  return text;
}

function shown(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

export function filterControl(prop, value, set, scope) {
  const current = value && typeof value === "object" ? structuredClone(value) : {};
  current.conditions = Array.isArray(current.conditions) ? current.conditions : [];
  current.combinator = current.combinator || "and";
  const commit = () => {
    const filter = prop.typeOptions?.filter || {};
    current.options = { ...(current.options || {}), ...filterOptions(filter, scope.root || {}, scope.version) };
    set(current);
  };
  const box = el("div", { class: "filter" });
  current.conditions.forEach((condition, index) => box.append(conditionRow(current, condition, index, commit)));
  const combinator = el(
    "select",
    { class: "combinator", onchange: (e) => { current.combinator = e.target.value; commit(); } },
    el("option", { value: "and", text: "AND: all conditions" }),
    el("option", { value: "or", text: "OR: any condition" }),
  );
  combinator.value = current.combinator;
  const add = el("button", {
    type: "button",
    class: "add-row",
    text: prop.placeholder || "Add Condition",
    onclick: () => {
      current.conditions.push({ id: randomId(), leftValue: "", rightValue: "", operator: operatorOf("string", "equals") });
      commit();
    },
  });
  box.append(el("div", { class: "filter-footer" }, combinator, add));
  return box;
}

function conditionRow(current, condition, index, commit) {
  const operator = condition.operator || { type: "string", operation: "equals" };
  const left = el("input", { type: "text", class: "left", placeholder: "value1" });
  left.value = shown(condition.leftValue);
  left.addEventListener("change", () => { condition.leftValue = left.value; commit(); });
  const select = el(
    "select",
    { class: "operator" },
    ...OPERATORS.map(([type, op, label]) => el("option", { value: `${type}:${op}`, text: label })),
  );
  select.value = `${operator.type}:${operator.operation}`;
  select.addEventListener("change", () => {
    const [type, op, , rightType] = OPERATORS[select.selectedIndex];
    condition.operator = operatorOf(type, op, rightType);
    commit();
  });
  const row = el("div", { class: "fc-row condition", "data-index": String(index) }, left, select);
  if (!operator.singleValue) {
    const right = el("input", { type: "text", class: "right", placeholder: "value2" });
    right.value = shown(condition.rightValue);
    right.addEventListener("change", () => {
      condition.rightValue = typed(right.value, operator.rightType || operator.type);
      commit();
    });
    row.append(right);
  }
  row.append(
    el("button", {
      type: "button",
      class: "remove",
      text: "×",
      "aria-label": "Remove condition",
      onclick: () => { current.conditions.splice(index, 1); commit(); },
    }),
  );
  return row;
}
