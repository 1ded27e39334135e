// More rows of lines in the invoice form: the element marked data-add-line
// gets a button that adds a row of line fields after the last, numbered on,
// up to its data-max-lines. Without this script the form has its five rows.
"use strict";

document.querySelectorAll("[data-add-line]").forEach(function (lines) {
  var max = parseInt(lines.getAttribute("data-max-lines"), 10);
  var button = document.createElement("button");
  button.type = "button";
  button.className = "secondary";
  button.textContent = "Add a line";
  lines.appendChild(button);
  button.addEventListener("click", function () {
    var rows = lines.querySelectorAll(".line");
    var last = rows[rows.length - 1];
    var n = rows.length;
    if (n >= max) {
      button.disabled = true;
      return;
    }
    var row = last.cloneNode(true);
    row.querySelectorAll("[id], [for], [name]").forEach(function (el) {
      ["id", "for", "name"].forEach(function (attr) {
        var v = el.getAttribute(attr);
        if (v !== null) {
          el.setAttribute(attr, v.replace(/lines\[\d+\]/g, "lines[" + n + "]"));
        }
      });
      if (el.tagName === "INPUT") {
        el.value = "";
        el.removeAttribute("aria-invalid");
        // The new row has no errors: only its hints describe it.
        var hints = (el.getAttribute("aria-describedby") || "").split(" ").filter(function (id) {
          return id !== "" && !/-error$/.test(id);
        });
        if (hints.length > 0) {
          el.setAttribute("aria-describedby", hints.join(" "));
        } else {
          el.removeAttribute("aria-describedby");
        }
      }
    });
    row.querySelectorAll(".error").forEach(function (el) { el.remove(); });
    var legend = row.querySelector("legend");
    if (legend) {
      legend.textContent = "Line " + (n + 1);
    }
    last.after(row);
    row.querySelector("input").focus();
    if (n + 1 >= max) {
      button.disabled = true;
    }
  });
});
