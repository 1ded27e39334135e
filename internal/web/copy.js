// The copy button: each element marked data-copy gets a button that puts
// its text on the clipboard, and says so. Without this script (or without
// a clipboard the page may write to) there is no button, and the text
// stays there to select and copy by hand.
(function () {
  'use strict';
  if (!window.isSecureContext || !navigator.clipboard) {
    return;
  }
  document.querySelectorAll('[data-copy]').forEach(function (el) {
    var label = el.getAttribute('data-copy') || 'Copy';
    var button = document.createElement('button');
    button.type = 'button';
    button.className = 'secondary';
    button.textContent = label;
    var status = document.createElement('span');
    status.className = 'copy-status';
    status.setAttribute('role', 'status');
    button.addEventListener('click', function () {
      navigator.clipboard.writeText(el.textContent.trim()).then(function () {
        status.textContent = 'Copied.';
      }, function () {
        status.textContent = 'Not copied: select the text and copy it.';
      });
    });
    var row = document.createElement('span');
    row.className = 'copy';
    row.appendChild(button);
    row.appendChild(status);
    el.insertAdjacentElement('afterend', row);
  });
}());
