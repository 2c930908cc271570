"""One Controller per resource: plans, catalog, performance model, health. Handlers are thin:
decode the request, call a service, encode the answer."""
