"""The log and its surface: the lossless JSON domain, the event envelope, the session header, the
surface ops with their provenance and rewrite rules, and the session built from them."""
