// A main node's ports on the canvas: its main inputs on the left, its outputs on the right, each
// named when the node type names them (an If's "true" and "false", a Merge's "Input 1"...).

import { svg } from "./util.js";

// Where port `index` of `count` sits along a node's side of height `h`.
export function portY(h, count, index) {
  return (h * (index + 1)) / (count + 1);
}

// `ports`: {inputs, outputs, inputNames, outputNames} (NodeTypes.mainPorts); `onPress(event,
// output)` starts a connection from an output.
export function drawPorts(g, node, size, ports, onPress) {
  for (let i = 0; i < ports.inputs; i++) {
    const cy = portY(size.h, ports.inputs, i);
    g.append(svg("circle", { class: "handle in", cx: 0, cy, r: 7, "data-node": node.name, "data-input": i }));
    if (ports.inputs > 1 && ports.inputNames[i]) {
      g.append(svg("text", { class: "port-label in", x: 10, y: cy + 4, text: ports.inputNames[i] }));
    }
  }
  for (let i = 0; i < ports.outputs; i++) {
    const cy = portY(size.h, ports.outputs, i);
    const out = svg("circle", { class: "handle out", cx: size.w, cy, r: 7, "data-output": i });
    out.addEventListener("pointerdown", (e) => onPress(e, i));
    g.append(out);
    if (ports.outputs > 1 && ports.outputNames[i]) {
      g.append(svg("text", { class: "port-label out", x: size.w + 10, y: cy - 8, text: ports.outputNames[i] }));
    }
  }
}
