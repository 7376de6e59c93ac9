"""Overhead decided across nights: the history of nights (``store``), one night from a results dir (``night``), the
history read as series (``series``), their change points by Apache Otava's detector (``detect``) and the verdict on
them (``verdict``). docs/history.md says what each command does and how the settings were judged."""
