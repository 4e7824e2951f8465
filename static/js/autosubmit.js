/* Forms apply at once: a changed <select data-autosubmit> or a ticked box in a
 * <form data-autosubmit> submits its form.  Without JavaScript the forms keep
 * their buttons (progressive enhancement). */
(function () {
  "use strict";
  document.querySelectorAll("select[data-autosubmit]").forEach((select) => {
    select.addEventListener("change", () => select.form.submit());
  });
  document.querySelectorAll("form[data-autosubmit]").forEach((form) => {
    form.addEventListener("change", (event) => {
      if (event.target.matches("input[type=checkbox], input[type=radio], select")) {
        form.submit();
      }
    });
  });
})();
