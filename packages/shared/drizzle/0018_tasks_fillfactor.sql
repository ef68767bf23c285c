-- Room on every page of tasks for the row's next version: the provider-id checkpoint and the lease
-- renewals change no indexed column, so with free space on the row's page Postgres updates it in
-- place (a HOT update: no index entries, no new page). Filled pages (the default 100) made about
-- half of those updates write an entry into every index of the table. Takes effect for pages
-- written from now on; existing pages keep their fill until rewritten.
ALTER TABLE "tasks" SET (fillfactor = 80);
