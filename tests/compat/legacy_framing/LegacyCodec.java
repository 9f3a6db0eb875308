/*
 * Runs frames through the RPC codec of TubeMQ 1.2.0-incubating (tubemq-core's buffer stream and
 * Netty encoder, and its decoder behind the length-field decoder of that release's pipeline), so
 * a test can hold our own encoder and decoder against it byte for byte.
 *
 *   java LegacyCodec encode   stdin: lines "serialNo hexPayload"; stdout: one hex line per frame
 *   java LegacyCodec decode   stdin: one hex line (a byte stream); stdout: "serialNo hexPayload"
 *                             per frame, then "END"; a refused stream prints "ERROR <exception>"
 */
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.List;
import org.apache.inlong.tubemq.corerpc.RpcDataPack;
import org.apache.inlong.tubemq.corerpc.netty.ByteBufferOutputStream;
import org.apache.inlong.tubemq.corerpc.netty.NettyProtocolDecoder;
import org.apache.inlong.tubemq.corerpc.netty.NettyProtocolEncoder;

public final class LegacyCodec {
    /** The 1.2.0 default of rpc.netty.max.message.size. */
    private static final int MAX_MESSAGE_SIZE = 5 * 1024 * 1024;

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "US-ASCII"));
        if (args.length == 1 && args[0].equals("encode")) {
            encode(in);
        } else if (args.length == 1 && args[0].equals("decode")) {
            decode(in);
        } else {
            System.err.println("usage: LegacyCodec encode|decode");
            System.exit(2);
        }
        System.out.flush();
    }

    private static void encode(BufferedReader in) throws Exception {
        EmbeddedChannel channel = new EmbeddedChannel(new NettyProtocolEncoder());
        for (String line; (line = in.readLine()) != null && !line.isEmpty();) {
            String[] parts = line.split(" ");
            byte[] payload = unhex(parts[1]);
            // The RPC layer's own buffer stream: 8 KiB blocks, as a server answer is built.
            ByteBufferOutputStream stream = new ByteBufferOutputStream();
            stream.write(payload, 0, payload.length);
            List<ByteBuffer> blocks = stream.getBufferList();
            channel.writeOutbound(new RpcDataPack((int) Long.parseLong(parts[0]), blocks));
            ByteBuf out = channel.readOutbound();
            byte[] bytes = new byte[out.readableBytes()];
            out.readBytes(bytes);
            out.release();
            System.out.println(hex(bytes));
        }
        channel.finishAndReleaseAll();
    }

    private static void decode(BufferedReader in) throws Exception {
        EmbeddedChannel channel = new EmbeddedChannel(
                new LengthFieldBasedFrameDecoder(MAX_MESSAGE_SIZE, 0, 4, 0, 4),
                new NettyProtocolDecoder());
        try {
            channel.writeInbound(Unpooled.wrappedBuffer(unhex(in.readLine())));
        } catch (Exception e) {
            System.out.println("ERROR " + e.getClass().getName());
            return;
        }
        for (Object msg; (msg = channel.readInbound()) != null;) {
            RpcDataPack pack = (RpcDataPack) msg;
            ByteArrayOutputStream payload = new ByteArrayOutputStream();
            for (ByteBuffer block : pack.getDataLst()) {
                payload.write(block.array(), block.position(), block.remaining());
            }
            System.out.println((pack.getSerialNo() & 0xFFFFFFFFL) + " " + hex(payload.toByteArray()));
        }
        System.out.println("END");
    }

    private static byte[] unhex(String text) {
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    private static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(String.format("%02x", b & 0xFF));
        }
        return sb.toString();
    }
}
