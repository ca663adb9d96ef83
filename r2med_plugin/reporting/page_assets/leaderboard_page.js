// r2med leaderboard --html: sorting and filters, no library and no network.
(function () {
  "use strict";
  var BAR_STEP = 18;

  function sortValue(row, column) {
    var cell = row.cells[column];
    return cell && cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : null;
  }

  // Rows without a value ("-") stay last whichever way a column is sorted; equal values keep their order.
  function compare(a, b, numeric, direction) {
    if (a === null || b === null) {
      return a === b ? 0 : (a === null ? 1 : -1);
    }
    var order = numeric ? parseFloat(a) - parseFloat(b) : a.localeCompare(b);
    return direction === "ascending" ? order : -order;
  }

  function sortBy(table, heading) {
    var column = Number(heading.getAttribute("data-col"));
    var numeric = heading.getAttribute("data-type") === "number";
    var current = heading.getAttribute("aria-sort");
    var direction = current ? (current === "ascending" ? "descending" : "ascending") : heading.getAttribute("data-first");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (x, y) {
      return compare(sortValue(x, column), sortValue(y, column), numeric, direction);
    });
    rows.forEach(function (row) { body.appendChild(row); });
    table.querySelectorAll("th").forEach(function (other) { other.removeAttribute("aria-sort"); });
    heading.setAttribute("aria-sort", direction);
  }

  function chosen() {
    var wanted = {};
    document.querySelectorAll("select[data-filter]").forEach(function (select) {
      wanted[select.getAttribute("data-filter")] = select.value;
    });
    return wanted;
  }

  function matches(element, wanted) {
    return Object.keys(wanted).every(function (key) {
      return !wanted[key] || element.getAttribute("data-" + key) === wanted[key];
    });
  }

  // Visible bars close up, so a filtered chart has no gaps.
  function layoutChart(svg, visible) {
    var position = 0;
    svg.querySelectorAll("g[data-row]").forEach(function (bar) {
      var show = visible[bar.getAttribute("data-row")] === true;
      bar.style.display = show ? "" : "none";
      if (show) {
        bar.setAttribute("transform", "translate(0," + (BAR_STEP * position + 3) + ")");
        position += 1;
      }
    });
    var height = BAR_STEP * position + 6;
    svg.setAttribute("height", String(height));
    svg.setAttribute("viewBox", "0 0 " + svg.getAttribute("width") + " " + height);
  }

  function applyFilters() {
    var wanted = chosen();
    var visible = {};
    var shown = 0;
    var rows = document.querySelectorAll("tr[data-row]");
    rows.forEach(function (row) {
      var show = matches(row, wanted);
      row.hidden = !show;
      visible[row.getAttribute("data-row")] = show;
      shown += show ? 1 : 0;
    });
    document.querySelectorAll("section[data-benchmark]").forEach(function (section) {
      var benchmark = section.getAttribute("data-benchmark");
      section.hidden = Boolean(wanted.benchmark) && wanted.benchmark !== benchmark;
    });
    document.querySelectorAll("figure.chart svg").forEach(function (svg) { layoutChart(svg, visible); });
    var counter = document.getElementById("shown");
    if (counter) {
      counter.textContent = shown + " of " + rows.length + " rows shown";
    }
  }

  // A table wider than the window: name the columns that lie off screen, beside the table (and again as it scrolls).
  function markOffScreen() {
    document.querySelectorAll("section[data-benchmark]").forEach(function (section) {
      var scroller = section.querySelector(".scroll");
      var hint = section.querySelector(".offscreen");
      if (!scroller || !hint) {
        return;
      }
      var box = scroller.getBoundingClientRect();
      var right = [], left = [];
      scroller.querySelectorAll("th[data-col]").forEach(function (heading) {
        var edge = heading.getBoundingClientRect();
        var name = heading.getAttribute("data-name");
        if (edge.right > box.right + 1) {
          right.push(name);
        } else if (edge.left < box.left - 1) {
          left.push(name);
        }
      });
      var parts = [];
      if (right.length) {
        parts.push("off screen to the right: " + right.join(", "));
      }
      if (left.length) {
        parts.push("off screen to the left: " + left.join(", "));
      }
      hint.hidden = parts.length === 0;
      hint.textContent = parts.length ? "Scroll the table sideways; " + parts.join("; ") + "." : "";
    });
  }

  document.querySelectorAll(".scroll").forEach(function (scroller) {
    scroller.addEventListener("scroll", markOffScreen);
  });
  window.addEventListener("resize", markOffScreen);

  document.querySelectorAll("table.board").forEach(function (table) {
    table.querySelectorAll("th[data-col]").forEach(function (heading) {
      heading.addEventListener("click", function () { sortBy(table, heading); });
    });
  });
  document.querySelectorAll("select[data-filter]").forEach(function (select) {
    select.addEventListener("change", applyFilters);
  });
  document.querySelectorAll("select[data-filter]").forEach(function (select) {
    select.addEventListener("change", markOffScreen);
  });
  applyFilters();
  markOffScreen();
})();
