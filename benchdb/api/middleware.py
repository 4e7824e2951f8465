"""Free each API answer with its response, not in a garbage collector pass.

A DRF response and its view reference each other (``view.response`` and
``renderer_context["response"]``), so the answer's data (the tree of dicts
and lists a run detail or a comparison is made of, the statistics it
shows) is freed only when the garbage collector finds the cycle, in a pass
that lands in the middle of some later request.  Once the response is
rendered those two references are dropped, and the response and its data
go as soon as Django is done with them.
"""

from __future__ import annotations


def free_answers(get_response):
    def middleware(request):
        response = get_response(request)
        context = getattr(response, "renderer_context", None)
        if isinstance(context, dict) and getattr(response, "is_rendered", True):
            context.pop("response", None)
            view = context.get("view")
            if getattr(view, "response", None) is response:
                del view.response
        return response

    return middleware
