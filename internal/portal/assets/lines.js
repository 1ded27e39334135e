// The invoice editor without the round trips: "Add a line" adds a row of
// line fields after the last, numbered on, up to data-max-lines, and each
// line's amount and the totals follow what is typed, reckoned as the
// server reckons them (exact decimals, not floats: BigInt in ten-thousandths
// and cents, each rounding half away from zero), so "Update totals" is not
// needed. Without this script both buttons post and the page comes back.
// The customer picker gains a filter (shown by the script alone): what is
// typed keeps the customers whose name, company or email hold it, any case
// and accent, and says how many.
"use strict";

(function () {
  var maxUnit = 99999999999990000n; // 9999999999999, in ten-thousandths

  // number reads a number as the server's web.Decimal does, in
  // ten-thousandths (the most places the domain takes), or null.
  function number(s, money) {
    s = s.trim();
    if (money) {
      if (s.indexOf("-$") === 0) {
        s = "-" + s.slice(2);
      } else if (s.indexOf("$") === 0) {
        s = s.slice(1);
      }
    }
    if (s.indexOf(",") >= 0) {
      if (!/^-?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]*)?$/.test(s)) {
        return null;
      }
      s = s.replace(/,/g, "");
    }
    if (!/^-?[0-9]+(\.[0-9]*)?$/.test(s) || s.length > 40) {
      return null;
    }
    var negative = s[0] === "-";
    var parts = s.replace("-", "").split(".");
    var frac = (parts[1] || "").replace(/0+$/, "");
    if (frac.length > 4) {
      return null;
    }
    var v = BigInt(parts[0] + (frac + "0000").slice(0, 4));
    return negative ? -v : v;
  }

  // rounded is n ÷ d (d a power of ten) rounded half away from zero.
  function rounded(n, d) {
    var negative = n < 0n;
    var q = ((negative ? -n : n) + d / 2n) / d;
    return negative ? -q : q;
  }

  function dollars(cents) {
    var negative = cents < 0n;
    var s = (negative ? -cents : cents).toString().padStart(3, "0");
    var whole = s.slice(0, -2).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return (negative ? "-" : "") + "$" + whole + "." + s.slice(-2);
  }

  // priced is a row's amount and tax in cents, null when the row is empty
  // (left out), false when the domain would refuse it.
  function priced(row) {
    var field = function (name) { return row.querySelector('[name$="].' + name + '"]').value; };
    var description = field("description").trim();
    var q = field("quantity").trim();
    var c = field("unitCost").trim();
    if (description === "" && q === "" && c === "") {
      return null;
    }
    var quantity = number(q, false);
    var cost = number(c, true);
    var rate = field("taxRate").trim() === "" ? 0n : number(field("taxRate"), false);
    var length = Array.from(description).length;
    if (length < 1 || length > 500 || quantity === null || cost === null || rate === null ||
        quantity <= 0n || quantity > maxUnit || cost > maxUnit || -cost > maxUnit || rate < 0n || rate > 1000000n) {
      return false;
    }
    var amount = rounded(quantity * cost, 1000000n);
    return { amount: amount, tax: rounded(amount * rate, 1000000n) };
  }

  document.querySelectorAll("[data-lines]").forEach(function (lines) {
    var form = lines.form || lines.closest("form");
    var max = parseInt(lines.getAttribute("data-max-lines"), 10);
    var add = lines.querySelector("[data-add-line]");
    var update = lines.querySelector("[data-update-totals]");
    update.hidden = true;

    function reckon() {
      var subtotal = 0n, tax = 0n, any = false, all = true;
      lines.querySelectorAll(".line").forEach(function (row) {
        var p = priced(row);
        row.querySelector("[data-line-amount]").textContent = p ? dollars(p.amount) : "—";
        if (p === false) {
          all = false;
        } else if (p) {
          any = true;
          subtotal += p.amount;
          tax += p.tax;
        }
      });
      var shown = { subtotal: subtotal, tax: tax, total: subtotal + tax };
      form.querySelectorAll("[data-total]").forEach(function (el) {
        el.textContent = any && all ? dollars(shown[el.getAttribute("data-total")]) : "—";
      });
    }

    add.type = "button";
    add.addEventListener("click", function () {
      var rows = lines.querySelectorAll(".line");
      var last = rows[rows.length - 1];
      var n = rows.length;
      if (n >= max) {
        add.disabled = true;
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
        if (el.tagName === "INPUT" || el.tagName === "SELECT") {
          if (el.tagName === "INPUT") {
            el.value = "";
          } else {
            el.selectedIndex = 0;
          }
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
      reckon();
      if (n + 1 >= max) {
        add.disabled = true;
      }
    });
    lines.addEventListener("input", reckon);
    lines.addEventListener("change", reckon);
    reckon();
  });

  document.querySelectorAll("[data-customer-filter]").forEach(function (box) {
    var input = box.querySelector("input");
    var count = box.querySelector("[role=status]");
    var select = document.getElementById(input.getAttribute("aria-controls"));
    var fold = function (s) { return s.normalize("NFD").replace(/[\u0300-\u036f]/g, "").toLowerCase(); };
    // The first option, a new customer, always stays; so does the one
    // chosen. Options leave the list rather than hide: Safari shows
    // hidden options.
    var options = Array.from(select.options).slice(1).map(function (o) { return { el: o, text: fold(o.textContent) }; });
    box.hidden = false;
    input.addEventListener("keydown", function (e) {
      if (e.key === "Enter") {
        e.preventDefault();
        select.focus();
      }
    });
    input.addEventListener("input", function () {
      var q = fold(input.value.trim()), shown = 0;
      options.forEach(function (o) {
        if (q === "" || o.text.indexOf(q) >= 0 || o.el.selected) {
          select.appendChild(o.el);
          shown += o.text.indexOf(q) >= 0 ? 1 : 0;
        } else {
          o.el.remove();
        }
      });
      count.textContent = q === "" ? "" : shown === 0 ? "No customer matches: choose “A new customer” and fill in below." :
        "Customers that match: " + shown + " of " + options.length + ".";
    });
  });
})();
