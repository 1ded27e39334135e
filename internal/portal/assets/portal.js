// The portal's progressive JavaScript: every page works without it.
// - [data-add-line] on a form's lines: a button that adds a row of line
//   fields, numbered on, up to the form's data-max-lines.
// - [data-copy] on a link's text: a button that copies it.
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

document.querySelectorAll("[data-copy]").forEach(function (text) {
  if (!navigator.clipboard) {
    return;
  }
  var button = document.createElement("button");
  button.type = "button";
  button.className = "secondary";
  button.textContent = "Copy the link";
  var status = document.createElement("span");
  status.setAttribute("role", "status");
  text.after(button, " ", status);
  button.addEventListener("click", function () {
    navigator.clipboard.writeText(text.textContent.trim()).then(function () {
      status.textContent = "Copied.";
    }, function () {
      status.textContent = "Could not copy: select the link and copy it.";
    });
  });
});
