"""Stage 4, the solver's arrays -> the Plan (``schema``): ``assemble`` names every figure after
``promise`` keeps the TTFT promise at the planned load and ``unserved`` says what went unserved;
``expectations`` measures a plan against a scenario's expectations."""
