//! End-to-end suite: starts the real `frontierd` binary against local sites and talks to it only as a user would.
