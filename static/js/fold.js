/* Long pages fold by group on a phone: the run page opens its first groups
 * for a desktop; at phone width (the stylesheet's 37.5rem) each group marked
 * data-fold-phone starts folded, so the first screen holds the answer and
 * the list of groups, one tap each.  A group the address names (#slug)
 * stays open.  Loaded before charts.js, which then draws a folded group's
 * charts when it is opened.
 */
(function () {
  "use strict";
  if (!window.matchMedia("(max-width: 37.5rem)").matches) return;
  const named = decodeURIComponent(window.location.hash.slice(1));
  document.querySelectorAll("details[data-fold-phone]").forEach((details) => {
    if (details.id !== named) details.open = false;
  });
})();
