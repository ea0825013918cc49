// The flamegraphs of memsup's HTML report, drawn from the JSON block the page embeds (its
// format is described in src/report/html.rs). Plain DOM: each frame is an absolutely
// positioned div with a data-name attribute; root on top, callees below.
"use strict";
(function () {
  const ROW_HEIGHT = 18; // pixels per stack level
  const MIN_PERCENT = 0.05; // frames narrower than this share of the view are not drawn
  const MAX_LEVELS = 40; // levels drawn below the zoomed frame; deeper ones behind a marker
  const MAX_CALLERS = 5; // callers drawn above the zoomed frame besides the root
  const MARKER_COLOR = "rgb(225, 225, 225)";
  const MATCH_COLOR = "rgb(190, 90, 250)";
  const UNCHANGED_COLOR = "rgb(220, 220, 220)"; // differential pages: a frame whose own bytes did not change

  const data = JSON.parse(document.getElementById("memsup-data").textContent);
  if (data.graphs.length === 0) {
    return;
  }
  const search = document.getElementById("search");
  const matched = document.getElementById("matched");
  const tooltip = document.getElementById("tooltip");
  const graphs = data.graphs.map(buildGraph);
  let current = 0;
  let term = ""; // the search, lower case; empty matches nothing
  let inverted = false; // bottom-up: the allocator's callers at the root

  // The tree of one graph. Node 0 is the root, "all"; the others come in the data's
  // pre-order, so a parent always comes before its children.
  function buildGraph(graph, index) {
    const runtime = new Set(graph.runtime);
    const root = node("all", graph.total, null, false, 0);
    const nodes = [root];
    graph.nodes.forEach(([parent, name, value], position) => {
      const up = nodes[parent + 1];
      const child = node(graph.names[name], value, up, runtime.has(name), nodes.length);
      child.module = text(graph.modules, graph.name_modules, name);
      child.location = text(graph.locations, graph.node_locations, position);
      child.count = graph.counts ? graph.counts[position] : undefined;
      up.children.push(child);
      nodes.push(child);
    });
    if (graph.counts) {
      root.count = root.children.reduce((sum, child) => sum + child.count, 0);
    }
    if (graph.base) {
      tintChanges(nodes, graph.base);
    }
    MemsupViews.setHeights(nodes);
    const topDown = { nodes, root, zoom: root };
    return {
      topDown,
      bottomUp: null, // built when first shown
      view: topDown,
      countLabel: graph.count_label,
      zoom: root,
      section: document.getElementById("graph-" + index),
      chart: document.getElementById("chart-" + index), // null when there is nothing to show
      tab: document.querySelector('.tab[data-graph="' + index + '"]'), // null for a moment
      moment: graph.moment, // the moment of a graph of what was live then
    };
  }

  // texts[indices[position]], or "" when the data has none for it.
  function text(texts, indices, position) {
    const index = indices ? indices[position] : -1;
    return index >= 0 ? texts[index] : "";
  }

  // A node of the bottom-up tree standing for top-down node `from`'s frame.
  function invertedNode(name, parent, from) {
    const made = node(name, 0, parent, from.runtime, 0);
    made.module = from.module;
    made.count = from.count === undefined ? undefined : 0;
    made.byName = new Map();
    made.locations = new Set();
    return made;
  }

  function setView(graph) {
    if (inverted && !graph.bottomUp) {
      const nodes = MemsupViews.invert(graph.topDown.nodes, invertedNode);
      MemsupViews.setHeights(nodes);
      graph.bottomUp = { nodes, root: nodes[0], zoom: nodes[0] };
    }
    graph.view = inverted ? graph.bottomUp : graph.topDown;
  }

  function node(name, value, parent, runtime, index) {
    const depth = parent ? parent.depth + 1 : 0;
    const key = name.toLowerCase();
    return { name, key, value, parent, runtime, index, depth, children: [] };
  }

  // A differential page (src/report/html/differential.rs): each frame's change (new minus
  // old bytes through it) and its own change (less its callees' changes), which colours it:
  // red for growth, blue for shrink, the deeper the larger against the graph's largest.
  function tintChanges(nodes, base) {
    nodes.forEach((each, index) => {
      each.change = each.value - (index === 0 ? base.total : base.nodes[index - 1]);
      each.own = each.change;
    });
    let largest = 0;
    for (const each of nodes) {
      if (each.parent) {
        each.parent.own -= each.change;
      }
    }
    for (const each of nodes) {
      largest = Math.max(largest, Math.abs(each.own));
    }
    for (const each of nodes) {
      each.tint = tint(each.own, largest);
    }
  }

  function tint(own, largest) {
    if (own === 0) {
      return UNCHANGED_COLOR;
    }
    const fade = 40 + Math.round(170 * (1 - Math.abs(own) / largest));
    return own > 0
      ? "rgb(255, " + fade + ", " + fade + ")"
      : "rgb(" + fade + ", " + fade + ", 255)";
  }

  function signed(bytes) {
    return (bytes > 0 ? "+" : bytes < 0 ? "-" : "") + human(Math.abs(bytes));
  }

  // Draws the zoomed frame at full width with its callees below it, MAX_LEVELS deep, and its
  // callers above it: the root and the nearest MAX_CALLERS, a marker for those between.
  function draw(graph) {
    if (!graph.chart) {
      return;
    }
    const zoom = graph.view.zoom;
    const frames = document.createDocumentFragment();
    const callers = [];
    for (let caller = zoom.parent; caller; caller = caller.parent) {
      callers.unshift(caller);
    }
    const hidden = callers.length - 1 - MAX_CALLERS; // callers[1..hidden] behind a marker
    let row = 0;
    callers.forEach((caller, position) => {
      if (hidden > 1 && position >= 1 && position <= hidden) {
        if (position === 1) {
          frames.appendChild(marker(caller, row++, 0, 100, "\u2026 " + hidden + " more callers"));
        }
        return;
      }
      frames.appendChild(frame(caller, 0, 100, true, row++));
    });
    const zoomRow = row;
    let deepest = zoomRow;
    const pending = [[zoom, 0]];
    while (pending.length > 0) {
      const [next, left] = pending.pop();
      const width = (100 * next.value) / zoom.value;
      if (width < MIN_PERCENT) {
        continue;
      }
      const level = zoomRow + next.depth - zoom.depth;
      frames.appendChild(frame(next, left, width, false, level));
      deepest = Math.max(deepest, level);
      if (level - zoomRow === MAX_LEVELS && next.children.length > 0) {
        const text = "\u2026 " + next.height + " more levels";
        frames.appendChild(marker(next, level + 1, left, width, text));
        deepest = Math.max(deepest, level + 1);
        continue;
      }
      let x = left;
      for (const child of next.children) {
        pending.push([child, x]);
        x += (100 * child.value) / zoom.value;
      }
    }
    graph.chart.replaceChildren(frames);
    graph.chart.style.height = (deepest + 1) * ROW_HEIGHT + "px";
  }

  function place(div, left, width, row) {
    div.style.left = left + "%";
    div.style.width = width + "%";
    div.style.top = row * ROW_HEIGHT + "px";
  }

  function frame(shown, left, width, caller, row) {
    const div = document.createElement("div");
    div.className = "frame";
    div.classList.toggle("runtime", shown.runtime);
    div.classList.toggle("ancestor", caller);
    div.classList.toggle("match", matches(shown));
    div.dataset.name = shown.name;
    div.dataset.index = shown.index;
    if (shown.change !== undefined) {
      div.dataset.change = shown.change;
    }
    place(div, left, width, row);
    div.style.background = color(shown);
    div.textContent = shown.name; // CSS cuts it to the width with an ellipsis
    return div;
  }

  // Stands for levels not drawn; a click zooms into `target`, which shows them.
  function marker(target, row, left, width, text) {
    const div = document.createElement("div");
    div.className = "frame more";
    div.dataset.name = text;
    div.dataset.index = target.index;
    place(div, left, width, row);
    div.style.background = MARKER_COLOR;
    div.textContent = text;
    return div;
  }

  function matches(candidate) {
    return term !== "" && candidate.index !== 0 && candidate.key.includes(term);
  }

  // FNV-1a over the UTF-16 code units: a name gets the same color in every graph.
  function hash(text) {
    let value = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) {
      value = Math.imul(value ^ text.charCodeAt(i), 0x01000193);
    }
    return value >>> 0;
  }

  // Warm hues (red to yellow) for the program, blues for the C/C++ runtime and ld.so.
  function color(shown) {
    if (matches(shown)) {
      return MATCH_COLOR;
    }
    if (shown.tint) {
      return shown.tint;
    }
    const h = hash(shown.name);
    const hue = shown.runtime ? 190 + (h % 45) : h % 55;
    const saturation = (shown.runtime ? 45 : 70) + ((h >>> 8) % 20);
    const lightness = 58 + ((h >>> 16) % 14);
    return "hsl(" + hue + ", " + saturation + "%, " + lightness + "%)";
  }

  // Like the text report: "100 bytes", "1.50 MiB (1572864 bytes)".
  function human(bytes) {
    if (bytes < 1024) {
      return bytes === 1 ? "1 byte" : bytes + " bytes";
    }
    const units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let scaled = bytes / 1024;
    let unit = 0;
    while (scaled >= 1024 && unit + 1 < units.length) {
      scaled /= 1024;
      unit++;
    }
    return scaled.toFixed(2) + " " + units[unit] + " (" + bytes + " bytes)";
  }

  function percent(part, whole) {
    return ((100 * part) / whole).toFixed(2) + "%";
  }

  // The share of the total under matching frames; a match under a match is not counted again.
  function showMatched(graph) {
    if (term === "" || graph.view.root.value === 0) {
      matched.textContent = "";
      return;
    }
    const covered = new Uint8Array(graph.view.nodes.length);
    let sum = 0;
    for (const each of graph.view.nodes) {
      if (each.parent && covered[each.parent.index]) {
        covered[each.index] = 1;
      } else if (matches(each)) {
        covered[each.index] = 1;
        sum += each.value;
      }
    }
    matched.textContent =
      "Matched: " + human(sum) + ", " + percent(sum, graph.view.root.value) + " of the total";
  }

  function showTooltip(graph, shown, event) {
    const where = [shown.location, shown.module].filter((part) => part).join(" in ");
    tooltip.textContent =
      shown.name + "\n" + (where ? where + "\n" : "") +
      human(shown.value) + ", " + percent(shown.value, graph.view.root.value) + " of the total" +
      (shown.count === undefined ? "" : "\n" + graph.countLabel + ": " + shown.count) +
      (shown.change === undefined
        ? ""
        : "\nchange " + signed(shown.change) + " (own " + signed(shown.own) + ")");
    tooltip.hidden = false;
    const margin = 12;
    let left = event.clientX + margin;
    if (left + tooltip.offsetWidth > window.innerWidth) {
      left = Math.max(0, event.clientX - margin - tooltip.offsetWidth);
    }
    let top = event.clientY + margin;
    if (top + tooltip.offsetHeight > window.innerHeight) {
      top = Math.max(0, event.clientY - margin - tooltip.offsetHeight);
    }
    tooltip.style.left = left + "px";
    tooltip.style.top = top + "px";
  }

  function frameAt(graph, event) {
    const div = event.target.closest(".frame");
    return div ? graph.view.nodes[Number(div.dataset.index)] : null;
  }

  function select(index) {
    current = index;
    graphs.forEach((graph, other) => {
      graph.section.hidden = other !== index;
      if (graph.tab) {
        graph.tab.setAttribute("aria-selected", String(other === index));
      }
    });
    showMoment(graphs[index].moment, index);
    draw(graphs[index]);
    showMatched(graphs[index]);
  }

  function zoomTo(graph, target) {
    graph.view.zoom = target;
    draw(graph);
  }

  graphs.forEach((graph, index) => {
    if (graph.tab) {
      graph.tab.addEventListener("click", () => select(index));
    }
    if (!graph.chart) {
      return;
    }
    // A click zooms into a frame; on the root (or a dimmed caller) it zooms back out.
    graph.chart.addEventListener("click", (event) => {
      const target = frameAt(graph, event);
      if (target) {
        zoomTo(graph, target);
      }
    });
    graph.chart.addEventListener("mousemove", (event) => {
      const target = frameAt(graph, event);
      if (target) {
        showTooltip(graph, target, event);
      } else {
        tooltip.hidden = true;
      }
    });
    graph.chart.addEventListener("mouseleave", () => {
      tooltip.hidden = true;
    });
  });
  search.addEventListener("input", () => {
    term = search.value.trim().toLowerCase();
    draw(graphs[current]);
    showMatched(graphs[current]);
  });
  document.getElementById("reset").addEventListener("click", () => {
    zoomTo(graphs[current], graphs[current].view.root);
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && event.target !== search) {
      zoomTo(graphs[current], graphs[current].view.root);
    }
  });

  // The moments: their tab shows the first image's peak, the picker any of them, and a click
  // on an image's timeline the moment of that image nearest to the time clicked.
  const momentTab = document.getElementById("moment-tab");
  const momentPicker = document.getElementById("moments");

  function showMoment(moment, index) {
    if (!momentTab) {
      return;
    }
    momentTab.setAttribute("aria-selected", String(Boolean(moment)));
    momentPicker.hidden = !moment;
    for (const button of momentPicker.querySelectorAll(".moment")) {
      button.setAttribute("aria-pressed", String(Number(button.dataset.graph) === index));
    }
  }

  function nearestMoment(image, time) {
    let best = -1;
    graphs.forEach((graph, index) => {
      if (!graph.moment || graph.moment.image !== image) {
        return;
      }
      const distance = Math.abs(graph.moment.time_ns - time);
      if (best < 0 || distance < Math.abs(graphs[best].moment.time_ns - time)) {
        best = index;
      }
    });
    return best;
  }

  if (momentTab) {
    momentTab.addEventListener("click", () => select(Number(momentPicker.dataset.first)));
    for (const button of momentPicker.querySelectorAll(".moment")) {
      button.addEventListener("click", () => select(Number(button.dataset.graph)));
    }
    for (const svg of document.querySelectorAll("section.timelines svg.timeline-chart")) {
      svg.addEventListener("click", (event) => {
        const image = Number(svg.closest("section.timelines").id.replace("timelines-", ""));
        const box = svg.getBoundingClientRect();
        const x = ((event.clientX - box.left) / box.width) * svg.viewBox.baseVal.width;
        const left = Number(svg.dataset.plotLeft);
        const right = Number(svg.dataset.plotRight);
        const start = Number(svg.dataset.timeStart);
        const end = Number(svg.dataset.timeEnd);
        const time = start + ((x - left) / (right - left)) * (end - start);
        const chosen = nearestMoment(image, time);
        if (chosen >= 0) {
          select(chosen);
          graphs[chosen].section.scrollIntoView();
        }
      });
    }
  }

  const invert = document.getElementById("invert");
  invert.addEventListener("click", () => {
    inverted = !inverted;
    invert.setAttribute("aria-pressed", String(inverted));
    graphs.forEach(setView);
    draw(graphs[current]);
    showMatched(graphs[current]);
  });

  // A browser may keep the search box's text across a reload.
  term = search.value.trim().toLowerCase();
  graphs.forEach(draw);
  select(0);
})();
