// The Code node's world inside its V8 isolate: n8n's globals ($input, $json, items, $('Node'),
// $node, $execution, $workflow, $now, $today, DateTime, console) built from the task's JSON, the
// user's code run as n8n's task runner runs it (the body of an async function, so `return` and
// top-level `await` work), and the outcome handed back as one JSON text. Loaded after Luxon
// (luxon.min.js) into a fresh isolate per run (sandbox/isolate.py): nothing of one run is seen by
// the next. Nothing here reaches outside the isolate: there is nothing outside to reach.
var __miniN8n = (function () {
  "use strict";

  const MAX_LOG_LINES = 200; // console.log lines kept per run; past that one line says so
  const MAX_LOG_CHARS = 4000; // characters kept of one line
  const CONSOLE_METHODS = ["log", "warn", "error", "info", "debug", "trace", "dir", "time",
    "timeEnd", "timeLog", "assert", "clear", "count", "countReset", "group", "groupEnd",
    "groupCollapsed", "table", "profile", "profileEnd", "timeStamp"];
  const logs = [];
  let dropped = 0;

  // n8n's console.log in a Code node: strings quoted, anything else as JSON (circular
  // references replaced); every other console method does nothing, as in n8n's task runner.
  function formatArg(arg) {
    if (typeof arg === "string") return `'${arg}'`;
    const seen = new WeakSet();
    try {
      const text = JSON.stringify(arg, (key, value) => {
        if (typeof value === "object" && value !== null) {
          if (seen.has(value)) return "[Circular Reference]";
          seen.add(value);
        }
        return value;
      });
      return text === undefined ? String(arg) : text;
    } catch (err) {
      return String(arg);
    }
  }

  const console = {};
  for (const name of CONSOLE_METHODS) console[name] = () => {};
  console.log = (...args) => {
    if (logs.length >= MAX_LOG_LINES) {
      dropped += 1;
      return;
    }
    const line = args.map(formatArg).join(" ");
    logs.push(line.length > MAX_LOG_CHARS ? line.slice(0, MAX_LOG_CHARS) + "…" : line);
  };

  function takeLogs() {
    const out = logs.slice();
    if (dropped) out.push(`(${dropped} more console.log lines not kept)`);
    return out;
  }

  // An error of n8n's own making (a node that does not exist, ...): n8n names no line for it.
  function codeError(message) {
    const err = new Error(message);
    err.fromHarness = true;
    return err;
  }

  // `$('Name')` and `$input`: one node's items, seen from the current item (same index, else
  // the first: the engine's expressions follow the same rule).
  function nodeData(name, items, state) {
    const executed = items !== null;
    const need = () => {
      if (!executed) throw codeError(`Node '${name}' hasn't been executed`);
      return items;
    };
    const paired = () => {
      const all = need();
      return all[state.index] !== undefined ? all[state.index] : all[0];
    };
    return {
      all: () => need().slice(),
      first: () => need()[0],
      last: () => need()[need().length - 1],
      get item() { return paired(); },
      pairedItem: () => paired(),
      itemMatching: (index) => {
        if (typeof index !== "number") throw codeError("Missing item index for .itemMatching()");
        return need()[index] !== undefined ? need()[index] : need()[0];
      },
      get isExecuted() { return executed; },
      params: {},
      context: {},
    };
  }

  function makeNodeRef(task, state, cache) {
    return function $(name) {
      if (!name) throw codeError("When calling $(), please specify a node");
      if (task.nodeNames.indexOf(name) === -1) throw codeError("Referenced node doesn't exist");
      if (!cache[name]) {
        const items = Object.prototype.hasOwnProperty.call(task.nodes, name)
          ? task.nodes[name]
          : null;
        cache[name] = nodeData(name, items, state);
      }
      return cache[name];
    };
  }

  // `$node["Name"]` (n8n's older form): the node's paired item's json, binary and run index.
  function makeNodeTable(ref) {
    return new Proxy({}, {
      get(target, name) {
        if (typeof name !== "string") return undefined;
        const data = ref(name);
        const item = data.item || {};
        return { json: item.json, binary: item.binary, runIndex: 0, parameter: {}, context: {} };
      },
    });
  }

  function dateGlobals(task) {
    const { DateTime, Duration, Interval, Settings } = luxon;
    Settings.defaultZone = task.timezone || "America/New_York";
    const now = DateTime.now();
    return {
      DateTime, Duration, Interval,
      $now: now,
      $today: now.set({ hour: 0, minute: 0, second: 0, millisecond: 0 }),
    };
  }

  // Timers on mini-racer's setTimeout (Atomics.waitAsync), which fails for a delay under 1 ms:
  // what n8n's task runner gives (Node's timers), closely enough for a Code node's waits.
  function timers() {
    const base = globalThis.setTimeout;
    const clear = globalThis.clearTimeout;
    const later = (fn, ms, ...args) => base(fn, Math.max(1, Number(ms) || 0), ...args);
    const intervals = new Map();
    let next = 1;
    const setInterval = (fn, ms, ...args) => {
      const id = next++;
      const tick = () => {
        if (!intervals.has(id)) return;
        intervals.set(id, later(tick, ms));
        fn(...args);
      };
      intervals.set(id, later(tick, ms));
      return id;
    };
    const clearInterval = (id) => {
      if (intervals.has(id)) clear(intervals.get(id));
      intervals.delete(id);
    };
    return { setTimeout: later, clearTimeout: clear, setInterval, clearInterval,
      setImmediate: (fn, ...args) => later(fn, 1, ...args), clearImmediate: clear };
  }

  function unsupported(name) {
    return () => { throw codeError(`${name} is not supported in mini-n8n's Code node`); };
  }

  function install(task, state) {
    const input = nodeData("$input", task.items, state);
    const ref = makeNodeRef(task, state, {});
    const prev = task.previousNode;
    const globals = {
      console,
      $: ref,
      $input: input,
      $node: makeNodeTable(ref),
      $execution: Object.freeze({ id: task.execution.id, mode: task.execution.mode,
        resumeUrl: "", customData: { set() {}, setAll() {}, get() {}, getAll: () => ({}) } }),
      $workflow: Object.freeze({ id: task.workflow.id, name: task.workflow.name,
        active: task.workflow.active }),
      $prevNode: Object.freeze({ name: prev, outputIndex: 0, runIndex: 0 }),
      $runIndex: task.runIndex || 0,
      $mode: task.execution.mode,
      $env: {},
      $getWorkflowStaticData: unsupported("$getWorkflowStaticData"),
      $jmespath: unsupported("$jmespath"),
      require: (module) => { throw codeError(`Module '${module}' is disallowed`); },
      ...dateGlobals(task),
      ...timers(),
    };
    Object.assign(globalThis, globals);
  }

  // The user's code, compiled once: line N of the code is line N of this script, named as
  // node's vm names it, so error lines read as in n8n.
  function compile(code) {
    return (0, eval)(
      "(async function VmCodeWrapper() {" + code + "\n})\n//# sourceURL=evalmachine.<anonymous>"
    );
  }

  function lineOf(err) {
    const rows = String((err && err.stack) || "").split("\n");
    const user = rows.find((r) => /evalmachine\.<anonymous>:\d+:\d+/.test(r) &&
      r.indexOf("VmCodeWrapper") === -1);
    const top = rows.find((r) => r.indexOf("VmCodeWrapper") !== -1 &&
      /evalmachine\.<anonymous>:\d+:\d+/.test(r));
    const match = (user || top || "").match(/evalmachine\.<anonymous>:(\d+):/);
    return match ? Number(match[1]) : null;
  }

  function errorJson(err, itemIndex) {
    const isError = err instanceof Error;
    const message = isError ? err.message
      : (err && typeof err === "object" && typeof err.message === "string") ? err.message
        : JSON.stringify(err);
    return {
      message: message === undefined ? "undefined" : String(message),
      name: isError ? err.name : null,
      lineNumber: isError && !err.fromHarness ? lineOf(err) : null,
      itemIndex: itemIndex === undefined ? null : itemIndex,
    };
  }

  // runOnceForEachItem as n8n's task runner does it: a null or undefined result drops the
  // item; an object's `json` (or the object itself) becomes the item, paired with its input.
  function eachResult(result, index) {
    if (result === null || result === undefined) return undefined;
    let json = result;
    if (typeof result === "object") {
      if ("json" in result) json = result.json;
      else if ("binary" in result) json = result.json === undefined ? {} : result.json;
    }
    const out = { json, pairedItem: { item: index } };
    if (typeof result === "object" && result.binary) out.binary = result.binary;
    return out;
  }

  async function runEach(fn, task, state) {
    const out = [];
    for (let index = 0; index < task.items.length; index++) {
      state.index = index;
      const item = task.items[index];
      Object.assign(globalThis, { item, $json: item.json, $binary: item.binary || {},
        $itemIndex: index });
      try {
        const kept = eachResult(await fn(), index);
        if (kept !== undefined) out.push(kept);
      } catch (err) {
        throw { at: index, err };
      }
    }
    return out;
  }

  async function runAll(fn, task) {
    const first = task.items[0] || { json: {} };
    Object.assign(globalThis, { items: task.items, $json: first.json, $binary: first.binary || {},
      $itemIndex: 0 });
    const result = await fn();
    return result === null ? [] : result;
  }

  function finish(outcome) {
    outcome.logs = takeLogs();
    let text;
    try {
      text = JSON.stringify(outcome);
    } catch (err) {
      text = JSON.stringify({ ok: false, logs: outcome.logs,
        error: { message: `The result could not be converted to JSON: ${err.message}` } });
    }
    return text;
  }

  async function run(task) {
    const state = { index: 0 };
    let fn;
    try {
      install(task, state);
      fn = compile(task.code);
    } catch (err) {
      return finish({ ok: false, error: errorJson(err) });
    }
    try {
      const result = task.mode === "runOnceForEachItem"
        ? await runEach(fn, task, state)
        : await runAll(fn, task);
      return finish({ ok: true, result: result === undefined ? null : result,
        undefinedResult: result === undefined });
    } catch (thrown) {
      const each = thrown && typeof thrown === "object" && "at" in thrown && "err" in thrown;
      return finish({ ok: false, error: errorJson(each ? thrown.err : thrown,
        each ? thrown.at : undefined) });
    }
  }

  return { run, takeLogs };
})();
