/* p4relay — Tofino 1's loss counts (included in RtpQuality): lost
 * (sequence gaps) and reordered in one cell of one register,
 * pipe.Egress.rtp_loss {lost, reordered}. A packet is one or the other, so
 * one stateful ALU counts both: the standard profile with IPv6 needs that
 * ALU to place in 12 stages. Tofino 2 keeps two registers, rtp_lost and
 * rtp_reordered: its switchbox takes no 64-bit register of 64K cells in any
 * stage (docs/design/ipv6.md "Tofino 2"), and its builds keep the Tofino 2
 * blocks in rtp_quality.p4 line for line. */
#if __TARGET_TOFINO__ != 2

    @name(".Egress.rtp_loss")
    Register<rtp_loss_t, quality_index_t>(QUALITY_CELLS) rtp_loss;
    RegisterAction<rtp_loss_t, quality_index_t, bit<32>>(rtp_loss) add_lost = {
        void apply(inout rtp_loss_t cell) {
            cell.lost = cell.lost + (bit<32>)eg_md.rtp_loss_code;
        }
    };
    RegisterAction<rtp_loss_t, quality_index_t, bit<32>>(rtp_loss) add_reordered = {
        void apply(inout rtp_loss_t cell) {
            cell.reordered = cell.reordered + 1;
        }
    };

#ifdef QUALITY_SPLIT
    @name(".Egress.rtp_loss_hi")
    Register<rtp_loss_t, quality_index_t>(QUALITY_HI_CELLS) rtp_loss_hi;
    RegisterAction<rtp_loss_t, quality_index_t, bit<32>>(rtp_loss_hi) add_lost_hi = {
        void apply(inout rtp_loss_t cell) {
            cell.lost = cell.lost + (bit<32>)eg_md.rtp_loss_code;
        }
    };
    RegisterAction<rtp_loss_t, quality_index_t, bit<32>>(rtp_loss_hi) add_reordered_hi = {
        void apply(inout rtp_loss_t cell) {
            cell.reordered = cell.reordered + 1;
        }
    };
#endif
#endif
