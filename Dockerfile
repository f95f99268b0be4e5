# Catena's node image: the static binaries, and iptables for the delegates
# the agent's reconciler runs (portmap removes its DNAT rules with it).
# Build them first (make build), then: make image (buildah, no registry), or
#   bash scripts/image-rootfs.sh bin/image-rootfs   # iptables, from this host
#   docker build -t localhost/catena:v0.1.0 .
FROM scratch
COPY bin/image-rootfs/ /
COPY bin/catena bin/catenactl bin/catena-agent /
ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT ["/catena-agent", "run"]
