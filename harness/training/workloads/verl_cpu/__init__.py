"""verl's real ``main_ppo`` on CPU: what verl needs from outside its tree to run there.

``plugin`` is the module verl imports in every process (``VERL_USE_EXTERNAL_MODULES``): a CPU platform
(``platform``), an HF-``generate`` rollout (``rollout``) and the private patches (``patches``, where every
verl symbol the harness touches is listed and checked). ``main`` launches ``main_ppo``, ``assets`` makes the
tiny model, tokenizer and data, ``reward`` is the dense reward. Nothing here is imported by the harness
process except ``patches`` (stdlib only) and ``assets`` (torch only when the cache is cold).
"""
