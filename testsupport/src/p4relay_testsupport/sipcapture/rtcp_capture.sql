-- Homer 5's table for RTCP reports, as Kamailio's sipcapture report_capture()
-- writes it (the logs_capture/rtcp_capture layout of Homer 5's schema).
CREATE TABLE rtcp_capture (
    id BIGSERIAL PRIMARY KEY,
    date TIMESTAMP WITHOUT TIME ZONE NOT NULL DEFAULT now(),
    micro_ts BIGINT NOT NULL DEFAULT 0,
    correlation_id VARCHAR(256) NOT NULL DEFAULT '',
    source_ip VARCHAR(60) NOT NULL DEFAULT '',
    source_port INTEGER NOT NULL DEFAULT 0,
    destination_ip VARCHAR(60) NOT NULL DEFAULT '',
    destination_port INTEGER NOT NULL DEFAULT 0,
    proto INTEGER NOT NULL DEFAULT 0,
    family INTEGER,
    type INTEGER NOT NULL DEFAULT 0,
    node VARCHAR(125) NOT NULL DEFAULT '',
    capture_id BIGINT,
    msg TEXT NOT NULL
);
CREATE INDEX rtcp_capture_correlation_id ON rtcp_capture (correlation_id);
