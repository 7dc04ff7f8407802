// The weekly schedule editor (templates/schedule.html): select a rectangle of cells by
// mouse, touch or keyboard, assign a mode (or inherit), and keep the hidden form field
// "grid" in step, which Check and Save post. Without JavaScript the page still shows the
// grid and posts the rules in force unchanged.
(function () {
  "use strict";
  var DAYS = 7, SLOTS = 144;
  var DAY = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
  var COLOURS = 12;

  function init() {
    var table = document.getElementById("grid");
    var field = document.getElementById("grid-value");
    if (!table || !field) {
      return;
    }
    var status = document.getElementById("grid-status");
    var modes = (table.getAttribute("data-modes") || "").split(",");
    var modeIndex = {};
    modes.forEach(function (m, i) { modeIndex[m] = i; });
    var editable = table.getAttribute("data-editable") === "1";
    var cells = [];
    for (var d = 0; d < DAYS; d++) {
      cells.push(new Array(SLOTS));
    }
    Array.prototype.forEach.call(table.querySelectorAll("td[data-day]"), function (td) {
      cells[+td.getAttribute("data-day")][+td.getAttribute("data-slot")] = td;
    });

    var focus = { d: 0, s: 48 }; // Monday 08:00
    var anchor = null;           // a corner of the selection
    var sel = null;              // {d0, d1, s0, s1}
    var keySelecting = false;    // Space/Enter started a selection
    var dragging = false;
    var dirty = false;

    function clock(s) {
      var m = s * 10;
      var h = Math.floor(m / 60);
      m = m % 60;
      return (h < 10 ? "0" : "") + h + ":" + (m < 10 ? "0" : "") + m;
    }
    function cellLabel(d, s) {
      var td = cells[d][s];
      var mode = td.getAttribute("data-mode");
      var span = DAY[d] + " " + clock(s) + "-" + clock(s + 1);
      return mode ? span + " " + mode : span + " inherited " + td.getAttribute("data-inherit");
    }
    function say(msg) {
      if (status) {
        status.textContent = msg;
      }
    }
    function paint(d, s) {
      var td = cells[d][s];
      var mode = td.getAttribute("data-mode");
      var shown = mode || td.getAttribute("data-inherit");
      var i = modeIndex[shown];
      var cls = (i === undefined ? "" : "m" + (i % COLOURS)) + (mode ? "" : " inh");
      if (inSel(d, s)) {
        cls += " sel";
      }
      td.className = cls;
      td.setAttribute("aria-label", cellLabel(d, s));
      td.setAttribute("aria-selected", inSel(d, s) ? "true" : "false");
    }
    function inSel(d, s) {
      return sel !== null && d >= sel.d0 && d <= sel.d1 && s >= sel.s0 && s <= sel.s1;
    }
    function setSel(a, b) {
      var old = sel;
      sel = a === null ? null : {
        d0: Math.min(a.d, b.d), d1: Math.max(a.d, b.d),
        s0: Math.min(a.s, b.s), s1: Math.max(a.s, b.s)
      };
      repaintRect(old);
      repaintRect(sel);
      if (sel) {
        say("Selected " + describe(sel));
      }
    }
    function describe(r) {
      var days = r.d0 === r.d1 ? DAY[r.d0] : DAY[r.d0] + "-" + DAY[r.d1];
      return days + " " + clock(r.s0) + "-" + clock(r.s1 + 1);
    }
    function repaintRect(r) {
      if (!r) {
        return;
      }
      for (var d = r.d0; d <= r.d1; d++) {
        for (var s = r.s0; s <= r.s1; s++) {
          paint(d, s);
        }
      }
    }
    function setFocus(d, s, move) {
      cells[focus.d][focus.s].setAttribute("tabindex", "-1");
      focus = { d: d, s: s };
      var td = cells[d][s];
      td.setAttribute("tabindex", "0");
      if (move) {
        td.focus();
      }
    }
    function serialise() {
      var days = [];
      for (var d = 0; d < DAYS; d++) {
        var row = [];
        for (var s = 0; s < SLOTS; s++) {
          var m = cells[d][s].getAttribute("data-mode");
          row.push(m && modeIndex[m] !== undefined ? String(modeIndex[m]) : "-");
        }
        days.push(row.join(","));
      }
      field.value = days.join("|");
    }
    function assign() {
      if (!sel) {
        say("Select cells first (drag, or Shift+arrow keys).");
        return;
      }
      var mode = document.getElementById("assign-mode").value;
      for (var d = sel.d0; d <= sel.d1; d++) {
        for (var s = sel.s0; s <= sel.s1; s++) {
          cells[d][s].setAttribute("data-mode", mode);
          paint(d, s);
        }
      }
      serialise();
      dirty = true;
      say((mode ? "Assigned " + mode + " to " : "Cleared (inherit) ") + describe(sel) + ". Not saved yet: Check or Save.");
    }

    // Roving tabindex: one cell of the grid is in the tab order.
    setFocus(focus.d, focus.s, false);

    table.addEventListener("focusin", function (ev) {
      var td = ev.target.closest ? ev.target.closest("td[data-day]") : null;
      if (td) {
        var d = +td.getAttribute("data-day"), s = +td.getAttribute("data-slot");
        if (d !== focus.d || s !== focus.s) {
          setFocus(d, s, false);
        }
        say(cellLabel(d, s) + (sel ? "; selected " + describe(sel) : ""));
      }
    });

    table.addEventListener("keydown", function (ev) {
      var from = { d: focus.d, s: focus.s };
      var d = focus.d, s = focus.s;
      switch (ev.key) {
        case "ArrowLeft": s = Math.max(0, s - 1); break;
        case "ArrowRight": s = Math.min(SLOTS - 1, s + 1); break;
        case "ArrowUp": d = Math.max(0, d - 1); break;
        case "ArrowDown": d = Math.min(DAYS - 1, d + 1); break;
        case "Home": s = 0; break;
        case "End": s = SLOTS - 1; break;
        case "PageUp": s = Math.max(0, s - 6); break; // an hour
        case "PageDown": s = Math.min(SLOTS - 1, s + 6); break;
        case " ":
        case "Enter":
          ev.preventDefault();
          if (!editable) {
            return;
          }
          if (keySelecting) {
            keySelecting = false;
            say("Selected " + describe(sel) + ". Choose a mode and press Assign (or the A key).");
          } else {
            keySelecting = true;
            anchor = { d: d, s: s };
            setSel(anchor, anchor);
            say("Selecting from " + cellLabel(d, s) + ": move with the arrow keys, Space or Enter ends.");
          }
          return;
        case "Escape":
          keySelecting = false;
          anchor = null;
          setSel(null, null);
          say("Selection cleared.");
          return;
        case "a":
        case "A":
          if (editable && !ev.ctrlKey && !ev.metaKey) {
            ev.preventDefault();
            assign();
          }
          return;
        default:
          return;
      }
      ev.preventDefault();
      setFocus(d, s, true);
      if (editable && (ev.shiftKey || keySelecting)) {
        if (!anchor) {
          anchor = from;
        }
        setSel(anchor, focus);
      } else {
        anchor = null; // moving without Shift keeps the selection for Assign
      }
    });

    // Pointer: press on a cell, drag over others, release.
    function cellAt(ev) {
      var el = document.elementFromPoint(ev.clientX, ev.clientY);
      return el && el.closest ? el.closest("#grid td[data-day]") : null;
    }
    table.addEventListener("pointerdown", function (ev) {
      if (!editable || ev.button !== 0) {
        return;
      }
      var td = ev.target.closest ? ev.target.closest("td[data-day]") : null;
      if (!td) {
        return;
      }
      ev.preventDefault();
      dragging = true;
      keySelecting = false;
      var p = { d: +td.getAttribute("data-day"), s: +td.getAttribute("data-slot") };
      anchor = ev.shiftKey && sel ? anchor : p;
      setFocus(p.d, p.s, true);
      setSel(anchor, p);
    });
    document.addEventListener("pointermove", function (ev) {
      if (!dragging) {
        return;
      }
      var td = cellAt(ev);
      if (!td) {
        return;
      }
      var p = { d: +td.getAttribute("data-day"), s: +td.getAttribute("data-slot") };
      if (p.d !== focus.d || p.s !== focus.s) {
        setFocus(p.d, p.s, false);
        setSel(anchor, p);
      }
    });
    function endDrag() {
      if (dragging) {
        dragging = false;
        if (sel) {
          say("Selected " + describe(sel) + ". Choose a mode and press Assign.");
        }
      }
    }
    document.addEventListener("pointerup", endDrag);
    document.addEventListener("pointercancel", endDrag);

    var btn = document.getElementById("assign");
    if (btn) {
      btn.addEventListener("click", assign);
    }
    var form = document.getElementById("sched-form");
    if (form) {
      form.addEventListener("submit", function () {
        serialise();
        dirty = false; // what is posted comes back on the next page
      });
    }
    window.addEventListener("beforeunload", function (ev) {
      if (dirty) {
        ev.preventDefault();
        ev.returnValue = "";
      }
    });
    serialise();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
