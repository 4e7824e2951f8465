/* Browse: filters apply at once (a ticked box or a search submits the form),
 * and on a phone the filter panel starts folded so results come first.
 * Without JavaScript the panel stays open and the "Apply filters" button works. */
(function () {
  "use strict";
  const form = document.getElementById("filters");
  const panel = document.getElementById("filter-panel");
  if (panel && window.matchMedia("(max-width: 50rem)").matches) panel.open = false;
  if (!form) return;
  const apply = form.querySelector("button.apply");
  if (apply) apply.hidden = true;
  form.addEventListener("change", (event) => {
    if (event.target.matches("input[type=checkbox]")) form.submit();
  });
  const search = form.querySelector("input[type=search]");
  if (search) {
    search.addEventListener("search", () => form.submit());  // Enter or the clear ×
  }
})();
