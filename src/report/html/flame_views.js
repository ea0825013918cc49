// The views of a flame graph besides the merged tree itself (src/report/html/flame.js
// draws them): the inverted tree, and the height of each node for collapsing deep stacks.
"use strict";
const MemsupViews = (function () {
  // The bottom-up tree of a top-down one whose nodes come parents first: the frames that
  // called the allocator at the root, their callers below. Each top-down node's own value
  // (its value less its callees') is one stack, from the node up to its outermost caller.
  // makeNode(name, parent, from) creates a node; from is the top-down node it stands for.
  function invert(nodes, makeNode) {
    const root = makeNode("all", null, nodes[0]);
    root.value = nodes[0].value;
    root.count = nodes[0].count;
    const inverted = [root];
    for (const each of nodes) {
      if (each === nodes[0]) {
        continue;
      }
      let own = each.value;
      let ownCount = each.count;
      for (const child of each.children) {
        own -= child.value;
        ownCount = ownCount === undefined ? undefined : ownCount - child.count;
      }
      if (own <= 0) {
        continue;
      }
      let parent = root;
      for (let caller = each; caller !== nodes[0]; caller = caller.parent) {
        let next = parent.byName.get(caller.name);
        if (!next) {
          next = makeNode(caller.name, parent, caller);
          next.index = inverted.length;
          parent.byName.set(caller.name, next);
          parent.children.push(next);
          inverted.push(next);
        }
        next.value += own;
        if (ownCount !== undefined) {
          next.count += ownCount;
        }
        if (caller.location) {
          next.locations.add(caller.location);
        }
        parent = next;
      }
    }
    for (const each of inverted) {
      each.children.sort((a, b) =>
        b.value - a.value || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      each.location = Array.from(each.locations).sort().join(", ");
    }
    return inverted;
  }

  // Sets each node's height: how many levels of callees lie below it (nodes parents first).
  function setHeights(nodes) {
    for (const each of nodes) {
      each.height = 0;
    }
    for (let position = nodes.length - 1; position > 0; position--) {
      const each = nodes[position];
      if (each.parent) {
        each.parent.height = Math.max(each.parent.height, each.height + 1);
      }
    }
  }

  return { invert, setHeights };
})();
