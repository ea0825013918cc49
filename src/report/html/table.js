// The call-site table of memsup's HTML report (src/report/html/site_table.rs): a click on a
// header sorts the rows by that column, numbers by their data-value, largest first, text
// A to Z; a second click on the same header reverses the order. Ties keep the page's order.
"use strict";
(function () {
  const table = document.getElementById("sites");
  if (!table) {
    return;
  }
  const body = table.tBodies[0];
  const headers = Array.from(table.tHead.rows[0].cells);
  let column = -1;
  let descending = false;

  function key(row, numeric) {
    const cell = row.cells[column];
    return numeric ? Number(cell.dataset.value) : cell.textContent;
  }

  function sortBy(header) {
    const numeric = header.dataset.kind === "number";
    if (column === header.cellIndex) {
      descending = !descending;
    } else {
      column = header.cellIndex;
      descending = numeric;
    }
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = key(a, numeric);
      const y = key(b, numeric);
      const order = x < y ? -1 : x > y ? 1 : 0;
      if (order === 0) {
        return Number(a.dataset.row) - Number(b.dataset.row);
      }
      return descending ? -order : order;
    });
    body.append(...rows);
    for (const each of headers) {
      each.removeAttribute("aria-sort");
    }
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  for (const header of headers) {
    header.addEventListener("click", () => sortBy(header));
  }
})();
