/* Copy buttons: a <button class="copy" data-copy="SELECTOR"> copies the text
 * of the element SELECTOR names (a command, a new token) and says so.  The
 * buttons are hidden in the markup and shown here, so a page without
 * JavaScript never shows a button that does nothing.  No inline script: the
 * pages' CSP allows only files from the site (web/middleware.py). */
(function () {
  "use strict";

  function fallbackCopy(text) {
    // Without the asynchronous clipboard (a page not served over HTTPS nor
    // from localhost): a hidden text box, selected and copied.
    const box = document.createElement("textarea");
    box.value = text;
    box.setAttribute("readonly", "");
    box.className = "copy-scratch";
    document.body.appendChild(box);
    box.select();
    let done = false;
    try {
      done = document.execCommand("copy");
    } catch (err) {
      done = false;
    }
    box.remove();
    return done ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(() => fallbackCopy(text));
    }
    return fallbackCopy(text);
  }

  document.querySelectorAll("button.copy[data-copy]").forEach((button) => {
    const source = document.querySelector(button.dataset.copy);
    if (!source) return;
    const label = button.textContent;
    const status = document.createElement("span");
    status.className = "copy-status";
    status.setAttribute("role", "status");
    button.after(status);
    button.hidden = false;
    button.addEventListener("click", () => {
      copyText(source.textContent.trim()).then(
        () => {
          button.textContent = "Copied";
          status.textContent = "";
          setTimeout(() => { button.textContent = label; }, 2000);
        },
        () => {
          // Nothing copied: select the text so Ctrl+C (or a long press) does it.
          const range = document.createRange();
          range.selectNodeContents(source);
          const selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          status.textContent = "Selected: press Ctrl+C to copy.";
        }
      );
    });
  });
})();
