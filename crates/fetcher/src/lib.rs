//! fetcher: HTTP only. Fetches robots.txt and pages and classifies the outcome. Never decides policy, never touches storage.
