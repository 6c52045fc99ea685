-- A table nested 33 levels deep: one level more than an imported table may have.
return { { { { { { { { { { { { { { { { { { { { { { { { { { { { { { { { { x = 1 } } } } } } } } } } } } } } } } } } } } } } } } } } } } } } } } }
